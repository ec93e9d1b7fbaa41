#include "launcher/program/worker_program.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/exit_codes.h"
#include "launcher/doctor/doctor.h"
#include "launcher/python/python_launch.h"

namespace dlaunch::launcher {

namespace fs = std::filesystem;

namespace {

std::string FindWorker(const std::string& self_exe) {
  if (const char* w = std::getenv("DLAUNCH_WORKER"); w && *w) return w;
  const fs::path dir = fs::path(self_exe).parent_path();
  for (const fs::path& candidate :
       {dir / "dlaunch-worker", dir.parent_path() / "worker" / "dlaunch-worker"}) {
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  throw UsageError("cannot find dlaunch-worker next to " + self_exe +
                   " (set DLAUNCH_WORKER to its path)");
}

}  // namespace

WorkerProgram::WorkerProgram(LaunchOptions options, std::string self_exe)
    : options_(std::move(options)), self_exe_(std::move(self_exe)) {}

std::vector<std::string> WorkerProgram::WorkerArgv(const std::string& command) const {
  std::vector<std::string> argv = {FindWorker(self_exe_), command};
  argv.insert(argv.end(), options_.program.begin(), options_.program.end());
  return argv;
}

void WorkerProgram::CheckBeforeStart() const {
  if (options_.skip_doctor) return;
  const std::vector<std::string> problems = DoctorFatalProblems();
  if (problems.empty()) return;
  std::string message = "doctor found problems that would break this job:";
  for (const auto& p : problems) message += "\n  ✗ " + p;
  message += "\n(run `dlaunch doctor` for the full report; --skip-doctor starts anyway)";
  throw UsageError(message);
}

void WorkerProgram::AddRankEnv(const std::string& rank_dir, const Env& launcher_env,
                               Env* env) const {
  python::AddRankEnv(rank_dir, launcher_env, env);
}

void WorkerProgram::BeforeAttempt(const std::string& rank_dir) const {
  python::ClearAttemptFiles(rank_dir);
}

void WorkerProgram::ShapeProcess(ProcessSpec* process) const {
  process->ignored_signals = {SIGUSR1, SIGUSR2};
}

int WorkerProgram::ExitCode(const RankOutcome& failed) const {
  if (failed.exited && failed.signal == 0) {
    if (failed.exit_code == kExitHang) return kExitHang;
    if (failed.exit_code == kExitUnhealthy) return kExitUnhealthy;
  }
  return kExitRankFailed;
}

}  // namespace dlaunch::launcher
