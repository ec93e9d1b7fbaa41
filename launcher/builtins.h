// The built-in commands (train, preflight, doctor, diagnose). The optional parts of the build
// meet the launcher here and only here.
#pragma once

#include <string>
#include <vector>

#include "launcher/options.h"
#include "launcher/supervision/supervisor.h"

namespace dlaunch::launcher {

// argv of each rank for `train` or `preflight`: the worker program and the checked arguments.
// Throws UsageError for bad arguments or a build without that command.
std::vector<std::string> BuiltinWorkerArgv(const LaunchOptions& options,
                                           const std::string& self_exe);

// For `preflight --help`: prints the built-in's usage once, before any rank or run directory
// exists, and returns true. False for anything else. Throws UsageError for bad arguments.
bool PrintBuiltinHelp(const LaunchOptions& options);

// What to print instead of a crashed rank's report when a built-in failed on purpose: a preflight
// FAIL verdict (exit 4) becomes its reasons, read from run_dir. Empty otherwise.
std::string BuiltinFailureReport(const LaunchOptions& options, const RankOutcome& failed,
                                 const std::string& run_dir);

// True when the built-in's rank 0 prints a machine-readable document on its stdout (preflight
// --json or --csv): the launcher then passes that stdout on alone and sends the rest to stderr.
bool BuiltinPrintsDocument(const LaunchOptions& options);

// Throws UsageError with doctor's fixes when a fatal mismatch would break the job.
void CheckDoctorBeforeStart();

// After an attempt of `train`, whose ranks are gone: removes the checkpoint.pt.tmp.<pid> a rank 0
// killed while writing left in --checkpoint-dir. Blocks for a directory scan; never throws.
void SweepBuiltinLeftovers(const LaunchOptions& options);

// dlaunch's exit code for a built-in whose first failed rank ended like `failed`: a watchdog
// timeout is a hang (3), an unhealthy pre-flight is 4, anything else 1.
int BuiltinExitCode(const RankOutcome& failed);

// This node's versions as JSON (empty without doctor), and the differences between nodes.
std::string DoctorFingerprint();
std::vector<std::string> CompareDoctorFingerprints(const std::vector<std::string>& per_node);

int RunDoctor(const std::vector<std::string>& args);
int RunDiagnose(const std::vector<std::string>& args);

}  // namespace dlaunch::launcher
