// `dlaunch preflight`: the cluster health check (bandwidth tables, link matrix, correctness,
// a hang watchdog, PASS/FAIL), run by dlaunch-worker; needs no libtorch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/options.h"
#include "launcher/program/worker_program.h"

namespace dlaunch::launcher {

class PreflightProgram : public WorkerProgram {
 public:
  PreflightProgram(LaunchOptions options, std::string self_exe);

  // `preflight --help`: prints preflight's usage. Throws UsageError for bad arguments.
  bool PrintHelp() const override;
  // The worker and preflight's arguments. Throws UsageError for bad arguments, and for the nccl
  // backend (given, or chosen by --backend auto) on a machine whose driver lists no GPU. Blocks
  // for reading the GPU list.
  std::vector<std::string> ResolveArgv() const override;
  // --json or --csv: rank 0's stdout is the document.
  bool PrintsDocument() const override;
  // Which transport each rank pair used, from nccl.log, beside the bandwidth tables (on stderr
  // when stdout is the document). Blocks for reading the logs.
  void AfterJob(const std::string& run_dir) const override;
  // A FAIL verdict (exit 4): its reasons, read from run_dir; nullopt for anything else.
  std::optional<Verdict> FailureVerdict(const RankOutcome& failed,
                                        const std::string& run_dir) const override;
};

}  // namespace dlaunch::launcher
