// The supervision group (restarts, teardown, forwarded signals) and the diagnosis group
// (heartbeats, hangs, stragglers, the job's events and metrics).
#include <cmath>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "launcher/cli/group_parsers.h"
#include "launcher/supervision/supervisor.h"

namespace dlaunch::launcher::cli {
namespace {

// torchrun's agent reads TORCH_ELASTIC_SHUTDOWN_TIMEOUT when --shutdown-timeout is not given.
std::chrono::milliseconds ShutdownTimeoutVariable(const std::string& text) {
  size_t used = 0;
  double s = -1;
  try {
    s = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || !(s >= 0) || s > kMaxDurationSeconds) {
    throw UsageError("TORCH_ELASTIC_SHUTDOWN_TIMEOUT must be a number of seconds (got '" + text +
                     "')");
  }
  return ShutdownTimeout(s);
}

std::chrono::milliseconds GracePeriod(const Flags& f,
                                      const std::map<std::string, std::string>& env) {
  const auto variable = env.find("TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
  if (f.Given("grace-period")) return Seconds(f.Get<double>("grace-period"), "--grace-period");
  if (auto t = f.First<double>({"shutdown-timeout", "shutdown_timeout"})) {
    return ShutdownTimeout(*t);
  }
  if (variable != env.end() && !variable->second.empty()) {
    return ShutdownTimeoutVariable(variable->second);
  }
  return Seconds(f.Get<double>("grace-period"), "--grace-period");
}

void ParseStragglerFlags(const Flags& f, LaunchOptions* o) {
  o->straggler_threshold = f.Get<double>("straggler-threshold");
  if (!std::isfinite(o->straggler_threshold) ||
      (o->straggler_threshold != 0 &&
       (o->straggler_threshold <= 1 || o->straggler_threshold > 100))) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", o->straggler_threshold);
    throw UsageError(std::string("--straggler-threshold must be a factor in (1, 100], or 0 for off "
                                 "(got ") +
                     got + ")");
  }
  o->straggler_window = f.Get<int64_t>("straggler-window");
  if (o->straggler_window < 20 || o->straggler_window > 100000) {
    throw UsageError("--straggler-window must be a number of steps in [20, 100000] (got " +
                     std::to_string(o->straggler_window) + ")");
  }
}

// --metrics-port, --metrics-addr and --events-file: what the job tells the world as it runs.
void ParseLiveFlags(const Flags& f, LaunchOptions* o) {
  if (f.Has("metrics-port")) {
    o->metrics_port = f.Get<int>("metrics-port");
    if (o->metrics_port < 0 || o->metrics_port > 65535) {
      throw UsageError("--metrics-port must be a port in [0, 65535], got " +
                       std::to_string(o->metrics_port));
    }
  }
  o->metrics_addr = f.Get<std::string>("metrics-addr");
  if (o->metrics_addr.empty()) throw UsageError("--metrics-addr needs an address");
  if (f.Has("events-file")) {
    o->events_file = f.Get<std::string>("events-file");
    if (o->events_file.empty()) throw UsageError("--events-file needs a file name");
  }
}

}  // namespace

void ParseSupervisionFlags(const Flags& f, const std::map<std::string, std::string>& env,
                           LaunchOptions* o) {
  o->max_restarts = *f.First<int>({"max_restarts", "max-restarts"});
  CheckMaxRestarts(o->max_restarts);
  const std::string policy = f.Get<std::string>("restart-policy");
  if (!RestartPolicyNamed(policy)) {
    throw UsageError("--restart-policy must be auto, always or observe (got '" + policy + "')");
  }
  o->restart_policy = *RestartPolicyNamed(policy);
  o->grace_period = GracePeriod(f, env);
  o->signals_to_handle =
      ParseSignalList(*f.First<std::string>({"signals-to-handle", "signals_to_handle"}));
}

void ParseDiagnosisFlags(const Flags& f, LaunchOptions* o) {
  const double heartbeat = f.Get<double>("heartbeat-interval");
  o->heartbeat_interval = Seconds(heartbeat, "--heartbeat-interval");
  // Every rank sends a heartbeat this often: faster than 100 a second is a flood, not liveness.
  if (heartbeat < 0.01) {
    throw UsageError("--heartbeat-interval must be at least 0.01 seconds (got " +
                     std::to_string(heartbeat) + ")");
  }
  o->heartbeat_timeout = Seconds(f.Get<double>("heartbeat-timeout"), "--heartbeat-timeout");
  o->hang_timeout = Seconds(f.Get<double>("hang-timeout"), "--hang-timeout", true);
  o->hang_on_silence = f.Get<bool>("hang-on-silence");
  ParseStragglerFlags(f, o);
  ParseLiveFlags(f, o);
  const std::string on_hang = f.Get<std::string>("on-hang");
  if (!OnHangNamed(on_hang)) {
    throw UsageError("--on-hang must be exit or restart (got '" + on_hang + "')");
  }
  o->on_hang = *OnHangNamed(on_hang);
}

}  // namespace dlaunch::launcher::cli
