// The built-in commands `train` and `preflight`: dlaunch-worker runs them. For now an adapter over
// launcher/builtins.h, which still holds their code (issue 44's second step gives each its own
// program here).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/options.h"
#include "launcher/program/rank_program.h"

namespace dlaunch::launcher {

class BuiltinProgram : public RankProgram {
 public:
  // `self_exe`: dlaunch's binary, beside which the worker is found.
  BuiltinProgram(LaunchOptions options, std::string self_exe);

  // The worker and the built-in's checked arguments (BuiltinWorkerArgv). Throws UsageError.
  // Blocks for reading the GPU list; `train --help` prints and exits.
  std::vector<std::string> ResolveArgv() const override;
  // doctor's fatal mismatches, unless --skip-doctor. Throws UsageError. Blocks for doctor's
  // probes.
  void CheckBeforeStart() const override;
  // TORCHELASTIC_ERROR_FILE and torch's dump files, as every rank has had them. Pure.
  void AddRankEnv(const std::string& rank_dir, const Env& launcher_env, Env* env) const override;
  // As every rank's: an earlier attempt's torch and agent files go. Never throws.
  void BeforeAttempt(const std::string& rank_dir) const override;
  // A forwarded SIGUSR1 or SIGUSR2 must not end a built-in rank that is still loading.
  void ShapeProcess(ProcessSpec* process) const override;
  bool PrintsDocument() const override;
  // train's leftover checkpoint temporaries (SweepBuiltinLeftovers). Never throws.
  void AfterAttempt() const override;
  // preflight: which transport each rank pair used, from nccl.log, beside its bandwidth tables
  // (on stderr when stdout is its --json or --csv document). Blocks for reading the logs.
  void AfterJob(const std::string& run_dir) const override;
  // A preflight FAIL verdict (exit 4): its reasons, read from run_dir.
  std::optional<Verdict> FailureVerdict(const RankOutcome& failed,
                                        const std::string& run_dir) const override;
  bool ExitSaysVerdict() const override { return true; }
  // A watchdog timeout is a hang (3), an unhealthy pre-flight 4, anything else 1.
  int ExitCode(const RankOutcome& failed) const override;

 private:
  LaunchOptions options_;
  std::string self_exe_;
};

}  // namespace dlaunch::launcher
