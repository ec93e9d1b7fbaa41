#include "launcher/torchrun_flags.h"

#include <algorithm>
#include <chrono>
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

}  // namespace

void ParseRdzvConf(const std::string& text, LaunchOptions* o) {
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
      o->notes.push_back("--rdzv-conf " + key + " has no effect under dlaunch: " + ignored->why);
      continue;
    }
    std::chrono::milliseconds* target = key == "join_timeout" || key == "timeout" ? &o->join_timeout
                                        : key == "last_call_timeout" ? &o->last_call_timeout
                                        : key == "close_timeout"     ? &o->close_timeout
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
}

void ParseStartMethod(const std::string& method, LaunchOptions* o) {
  if (method != "spawn" && method != "fork" && method != "forkserver") {
    throw UsageError("--start-method must be spawn, fork or forkserver (got '" + method + "')");
  }
  if (method != "spawn") {
    o->notes.push_back("--start-method " + method +
                       ": dlaunch starts every rank as a fresh process (fork and exec, as "
                       "spawn does); nothing of the launcher's memory is shared with the ranks");
  }
}

}  // namespace dlaunch::launcher
