// One dlaunch invocation that runs ranks: set-up checks, then this node's role and the job agent
// (attempts with restarts, the root-cause report and summary.json).
#pragma once

#include <string>

#include "launcher/cli/options.h"

namespace dlaunch::launcher {

// Blocks until the job ends; returns dlaunch's exit code. Throws UsageError for set-up problems
// found before any rank starts (missing program, unusable --log-dir, port in use).
int RunJob(const LaunchOptions& options, const std::string& self_exe);

}  // namespace dlaunch::launcher
