#include "launcher/program/preflight_program.h"

#include <iostream>

#include "core/base/proc.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "launcher/nccl_log/parser.h"
#include "launcher/nccl_log/report.h"
#include "worker/preflight/preflight_options.h"

namespace dlaunch::launcher {

PreflightProgram::PreflightProgram(LaunchOptions options, std::string self_exe)
    : WorkerProgram(std::move(options), std::move(self_exe)) {}

bool PreflightProgram::PrintHelp() const {
  if (!worker::ParsePreflightArgs(options().program).help) return false;
  std::cout << worker::PreflightUsage() << std::endl;
  return true;
}

std::vector<std::string> PreflightProgram::ResolveArgv() const {
  // The user's input first: its error is the one to fix, whatever else is missing.
  const LaunchOptions& o = options();
  const worker::PreflightOptions p = worker::ParsePreflightArgs(o.program, o.nproc * o.nnodes);
  // What a rank would find only once it asks CUDA: on a machine whose driver lists no GPU at
  // all, the nccl backend cannot run.
  if (!p.help && base::CountGpus() == 0) {
    if (p.backend == "nccl") {
      throw UsageError("preflight: --backend nccl, but this machine has no GPU (" +
                       std::string(base::kNvidiaGpuList) +
                       " is empty or absent): use --backend gloo");
    }
    worker::CheckBackendFlags(p, "gloo");  // -G and -R under --backend auto
  }
  return WorkerArgv("preflight");
}

bool PreflightProgram::PrintsDocument() const {
  return worker::ParsePreflightArgs(options().program).format != worker::OutputFormat::kText;
}

void PreflightProgram::AfterJob(const std::string& run_dir) const {
  (PrintsDocument() ? std::cerr : std::cout)
      << nccl_log::FormatPreflightSection(nccl_log::Analyze(nccl_log::ParseRankDirs(run_dir)))
      << std::flush;
}

std::optional<RankProgram::Verdict> PreflightProgram::FailureVerdict(
    const RankOutcome& failed, const std::string& run_dir) const {
  if (ExitCode(failed) != kExitUnhealthy) return std::nullopt;
  std::string report = worker::PreflightFailureReport(run_dir);
  if (report.empty()) return std::nullopt;
  return Verdict{std::move(report), "preflight verdict FAIL"};
}

}  // namespace dlaunch::launcher
