// What the built-in commands share: dlaunch-worker runs them (`train`, `preflight`), their ranks
// report a verdict in their exit code, and doctor checks the machine before they start.
#pragma once

#include <string>
#include <vector>

#include "launcher/cli/options.h"
#include "launcher/program/rank_program.h"

namespace dlaunch::launcher {

class WorkerProgram : public RankProgram {
 public:
  // doctor's fatal mismatches, unless --skip-doctor. Throws UsageError with doctor's fixes.
  // Blocks for doctor's probes.
  void CheckBeforeStart() const override;
  // TORCHELASTIC_ERROR_FILE and torch's dump files, as every rank has had them. Pure.
  void AddRankEnv(const std::string& rank_dir, const Env& launcher_env, Env* env) const override;
  // As every rank's: an earlier attempt's torch and agent files go. Never throws.
  void BeforeAttempt(const std::string& rank_dir) const override;
  // A forwarded SIGUSR1 or SIGUSR2 must not end a worker rank that is still loading.
  void ShapeProcess(ProcessSpec* process) const override;
  bool ExitSaysVerdict() const override { return true; }
  // A watchdog timeout is a hang (3), an unhealthy pre-flight 4, anything else 1.
  int ExitCode(const RankOutcome& failed) const override;

 protected:
  // `self_exe`: dlaunch's binary, beside which the worker is found.
  WorkerProgram(LaunchOptions options, std::string self_exe);

  // The worker ($DLAUNCH_WORKER, else dlaunch-worker beside dlaunch or in ../worker/),
  // `command`, then the user's arguments. Throws UsageError naming DLAUNCH_WORKER when the worker
  // is missing. Blocks for a few access calls.
  std::vector<std::string> WorkerArgv(const std::string& command) const;
  const LaunchOptions& options() const { return options_; }

 private:
  LaunchOptions options_;
  std::string self_exe_;
};

}  // namespace dlaunch::launcher
