// One dlaunch invocation that runs ranks: set-up checks, coordinator, attempts with restarts,
// the root-cause report and summary.json.
#pragma once

#include <string>
#include <vector>

#include "launcher/options.h"

namespace dlaunch::launcher {

// Blocks until the job ends; returns dlaunch's exit code. Throws UsageError for set-up problems
// found before any rank starts (missing program, unusable --log-dir, port in use).
int RunJob(const LaunchOptions& options, const std::string& self_exe);

// Finds `program` as execvp would (PATH lookup when it has no '/'). Throws UsageError when it is
// missing or not executable.
std::string ResolveProgram(const std::string& program);

// True when nothing listens on host:port (TCP) right now.
bool PortIsFree(const std::string& host, int port);
// A TCP port nothing listens on at the moment of the call.
int PickFreePort(const std::string& host);

}  // namespace dlaunch::launcher
