#include "launcher/program/builtin_program.h"

#include <signal.h>

#include <iostream>

#include "launcher/builtins.h"
#include "launcher/nccl_log/parser.h"
#include "launcher/nccl_log/report.h"
#include "launcher/python/python_launch.h"

namespace dlaunch::launcher {

BuiltinProgram::BuiltinProgram(LaunchOptions options, std::string self_exe)
    : options_(std::move(options)), self_exe_(std::move(self_exe)) {}

std::vector<std::string> BuiltinProgram::ResolveArgv() const {
  return BuiltinWorkerArgv(options_, self_exe_);
}

void BuiltinProgram::CheckBeforeStart() const {
  if (!options_.skip_doctor) CheckDoctorBeforeStart();
}

void BuiltinProgram::AddRankEnv(const std::string& rank_dir, const Env& launcher_env,
                                Env* env) const {
  python::AddRankEnv(rank_dir, launcher_env, env);
}

void BuiltinProgram::BeforeAttempt(const std::string& rank_dir) const {
  python::ClearAttemptFiles(rank_dir);
}

void BuiltinProgram::ShapeProcess(ProcessSpec* process) const {
  process->ignored_signals = {SIGUSR1, SIGUSR2};
}

bool BuiltinProgram::PrintsDocument() const { return BuiltinPrintsDocument(options_); }

void BuiltinProgram::AfterAttempt() const { SweepBuiltinLeftovers(options_); }

void BuiltinProgram::AfterJob(const std::string& run_dir) const {
  if (options_.command != Command::kPreflight) return;
  (PrintsDocument() ? std::cerr : std::cout)
      << nccl_log::FormatPreflightSection(nccl_log::Analyze(nccl_log::ParseRankDirs(run_dir)))
      << std::flush;
}

std::optional<RankProgram::Verdict> BuiltinProgram::FailureVerdict(
    const RankOutcome& failed, const std::string& run_dir) const {
  std::string report = BuiltinFailureReport(options_, failed, run_dir);
  if (report.empty()) return std::nullopt;
  return Verdict{std::move(report), "preflight verdict FAIL"};
}

int BuiltinProgram::ExitCode(const RankOutcome& failed) const { return BuiltinExitCode(failed); }

}  // namespace dlaunch::launcher
