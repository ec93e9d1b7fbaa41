// The output group (the log directory, the console, the duplicated streams, NCCL's logging) and
// the python group (the ranks' environment and how Python entries run).
#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

#include "core/error.h"
#include "launcher/cli/group_parsers.h"

namespace dlaunch::launcher::cli {
namespace {

void ParseConsoleFlags(const Flags& f, LaunchOptions* o) {
  o->quiet = f.Get<bool>("quiet");
  if (auto r = f.First<std::string>({"ranks-filter"})) o->ranks_filter = ParseRankList(*r);
  if (auto r = f.First<std::string>({"local-ranks-filter", "local_ranks_filter"})) {
    o->local_ranks_filter = ParseRankList(*r);
  }
  if (f.Has("redirects")) {
    o->redirects = ParseStdStreams(f.Get<std::string>("redirects"), "--redirects");
  }
  if (f.Has("tee")) o->tee = ParseStdStreams(f.Get<std::string>("tee"), "--tee");
  o->log_line_prefix_template =
      f.First<std::string>({"log-line-prefix-template", "log_line_prefix_template"}).value_or("");
}

void ParseNcclFlags(const Flags& f, LaunchOptions* o) {
  o->nccl_debug = f.First<std::string>({"nccl-debug"}).value_or("");
  if (f.Has("nccl-debug")) {
    static const char* kLevels[] = {"VERSION", "WARN", "INFO", "TRACE", "ABORT", "off"};
    if (std::none_of(std::begin(kLevels), std::end(kLevels),
                     [&](const char* l) { return o->nccl_debug == l; })) {
      throw UsageError("--nccl-debug must be VERSION, WARN, INFO, TRACE or off (got '" +
                       o->nccl_debug + "')");
    }
  }
  o->nccl_socket_ifname = f.First<std::string>({"nccl-socket-ifname"}).value_or("");
}

// --env KEY=VAL, in order.
void ParseRankEnv(const Flags& f, LaunchOptions* o) {
  if (!f.Has("env")) return;
  for (const auto& kv : f.Get<std::vector<std::string>>("env")) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError("--env takes KEY=VAL (got '" + kv + "')");
    }
    o->env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
}

}  // namespace

void CheckMonitorInterval(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) {
    throw UsageError("--monitor-interval must be a number of seconds, at least 0");
  }
}

void ParseOutputFlags(const Flags& f, LaunchOptions* o) {
  o->log_dir = *f.First<std::string>({"log_dir", "log-dir"});
  if (o->log_dir.empty()) throw UsageError("--log-dir must not be empty");
  ParseConsoleFlags(f, o);
  if (auto l = f.First<std::string>({"duplicate-stdout-filters", "duplicate_stdout_filters"})) {
    o->stdout_filters = ParseFilterList(*l);
  }
  if (auto l = f.First<std::string>({"duplicate-stderr-filters", "duplicate_stderr_filters"})) {
    o->stderr_filters = ParseFilterList(*l);
  }
  if (auto h = f.First<std::string>({"event-log-handler", "event_log_handler"})) {
    CheckEventLogHandler(*h);
  }
  if (auto m = f.First<double>({"monitor-interval", "monitor_interval"})) {
    CheckMonitorInterval(*m);
  }
  ParseNcclFlags(f, o);
}

void ParsePythonFlags(const Flags& f, LaunchOptions* o) {
  ParseRankEnv(f, o);
  o->no_python = f.Get<bool>("no-python") || f.Get<bool>("no_python");
  o->python = f.First<std::string>({"python"}).value_or("");
  o->module = f.Get<bool>("module");
  o->run_path = f.Get<bool>("run-path") || f.Get<bool>("run_path");
  o->python_agent = !f.Get<bool>("no-python-agent");
  if (o->module && o->run_path) throw UsageError("-m and --run-path exclude each other");
  if (o->run_path && o->no_python) {
    // torchrun's help: --run-path takes precedence over --no-python.
    o->notes.push_back("--no-python has no effect with --run-path, which runs the file in Python");
    o->no_python = false;
  }
  if (o->module && o->no_python) throw UsageError("-m runs Python: drop --no-python");
}

}  // namespace dlaunch::launcher::cli
