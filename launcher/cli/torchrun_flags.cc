#include "launcher/cli/torchrun_flags.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

#include "core/error.h"

namespace dlaunch::launcher {
namespace {

// torchrun's --rdzv-conf keys that have no counterpart here: accepted, with why they do nothing.
struct IgnoredRdzvKey {
  const char* key;
  const char* why;
};
constexpr IgnoredRdzvKey kIgnoredRdzvKeys[] = {
    {"read_timeout",
     "dlaunch's coordinator is not a c10d store; the ranks' waits for it follow --rdzv-timeout"},
    {"is_host",
     "node 0 (--node-rank 0, or the first node to listen on --rdzv-endpoint) hosts the "
     "coordinator"},
    {"keep_alive_interval", "node liveness follows --heartbeat-interval and --heartbeat-timeout"},
    {"keep_alive_max_attempt",
     "node liveness follows --heartbeat-interval and --heartbeat-timeout"},
    {"use_libuv", "dlaunch's coordinator is a gRPC service, not a TCPStore"},
    {"store_type", "dlaunch's coordinator is a gRPC service, not a TCPStore"},
};

// torchrun's flags dlaunch refuses whatever their value, and why.
struct RefusedFlag {
  const char* name;
  const char* why;
};
constexpr RefusedFlag kRefusedFlags[] = {
    {"logs-specs",
     "it loads a Python LogsSpecs class from torchrun's entry points; dlaunch's logs are its run "
     "directory (rank<R>/stdout.log and stderr.log under --log-dir)"},
    {"print-completion",
     "it prints torchrun's shell completion script (made by Python's shtab); dlaunch has none"},
};

}  // namespace

const char* RefusedTorchrunFlag(const std::string& name) {
  std::string dashed = name;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  for (const RefusedFlag& f : kRefusedFlags) {
    if (dashed == f.name) return f.why;
  }
  return nullptr;
}

StdStreams ParseStdStreams(const std::string& text, const std::string& flag) {
  auto bits = [](const std::string& v) {
    return v.size() == 1 && v[0] >= '0' && v[0] <= '3' ? v[0] - '0' : -1;
  };
  StdStreams s;
  if (text.find(':') == std::string::npos) {
    s.all = bits(text);
    if (s.all >= 0) return s;
  } else {
    std::stringstream in(text);
    bool ok = text.back() != ',';
    for (std::string item; ok && std::getline(in, item, ',');) {
      const size_t colon = item.find(':');
      const std::string rank = item.substr(0, colon);
      const int b = colon == std::string::npos ? -1 : bits(item.substr(colon + 1));
      ok = b >= 0 && !rank.empty() && rank.size() <= 4 &&
           rank.find_first_not_of("0123456789") == std::string::npos;
      if (ok) s.by_local_rank[std::stoi(rank)] = b;
    }
    if (ok) return s;
  }
  throw UsageError(flag + " must be 0-3 for every local rank or LOCAL:0-3,... per local rank " +
                   "(1 stdout, 2 stderr, 3 both; got '" + text + "')");
}

std::vector<std::string> ParseFilterList(const std::string& text) {
  std::vector<std::string> filters;
  std::string current;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != ',') {
      current += text[i];
    } else if (i + 1 < text.size() && text[i + 1] == ',') {
      current += ',';  // ",," is a comma inside a filter
      ++i;
    } else {
      if (!current.empty()) filters.push_back(current);
      current.clear();
    }
  }
  return filters;
}

void CheckEventLogHandler(const std::string& name) {
  if (name == "null" || name == "dynamic_rendezvous") return;
  if (name == "console") {
    throw UsageError(
        "--event-log-handler console: torchrun's handler prints its agent's Python event "
        "records, which dlaunch has not; dlaunch writes its job events as JSON lines with "
        "--events-file FILE (/dev/stderr for the console)");
  }
  throw UsageError(
      "--event-log-handler must be null or dynamic_rendezvous, torchrun's no-op "
      "handlers (got '" +
      name + "')");
}

RdzvConf ParseRdzvConf(const std::string& text) {
  RdzvConf conf;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    const auto* ignored = std::find_if(std::begin(kIgnoredRdzvKeys), std::end(kIgnoredRdzvKeys),
                                       [&](const IgnoredRdzvKey& k) { return key == k.key; });
    if (ignored != std::end(kIgnoredRdzvKeys)) {
      if (value.empty()) throw UsageError("--rdzv-conf: " + key + " needs a value (" + key + "=V)");
      conf.notes.push_back("--rdzv-conf " + key + " has no effect under dlaunch: " + ignored->why);
      continue;
    }
    std::optional<std::chrono::milliseconds>* target =
        key == "join_timeout" || key == "timeout" ? &conf.join_timeout
        : key == "last_call_timeout"              ? &conf.last_call_timeout
        : key == "close_timeout"                  ? &conf.close_timeout
                                                  : nullptr;
    if (!target) {
      std::string known = "timeout (or join_timeout), last_call_timeout, close_timeout";
      for (const auto& k : kIgnoredRdzvKeys) known += std::string(", ") + k.key;
      throw UsageError("--rdzv-conf: unknown key '" + key + "' (dlaunch takes " + known + ")");
    }
    double seconds = -1;
    size_t used = 0;
    try {
      seconds = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (value.empty() || used != value.size() || !(seconds >= 0) || seconds > 1e7) {
      throw UsageError("--rdzv-conf: " + key + " must be a number of seconds (got '" + value +
                       "')");
    }
    *target = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  }
  return conf;
}

std::optional<std::string> ParseStartMethod(const std::string& method) {
  if (method != "spawn" && method != "fork" && method != "forkserver") {
    throw UsageError("--start-method must be spawn, fork or forkserver (got '" + method + "')");
  }
  if (method == "spawn") return std::nullopt;
  return "--start-method " + method +
         ": dlaunch starts every rank as a fresh process (fork and exec, as spawn does); nothing "
         "of the launcher's memory is shared with the ranks";
}

}  // namespace dlaunch::launcher
