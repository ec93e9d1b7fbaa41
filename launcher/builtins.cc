#include "launcher/builtins.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "core/error.h"
#include "core/exit_codes.h"
#include "launcher/diagnose/diagnose.h"
#include "launcher/doctor/doctor.h"
#include "worker/preflight/preflight_options.h"
#ifdef DLAUNCH_HAVE_TRAIN
#include "worker/train/checkpoint_file.h"
#include "worker/train/train_options.h"
#endif

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

std::vector<std::string> BuiltinWorkerArgv(const LaunchOptions& o, const std::string& self_exe) {
  std::vector<std::string> argv = {FindWorker(self_exe)};
  if (o.command == Command::kPreflight) {
    worker::ValidatePreflightArgs(o.program, o.nproc * o.nnodes);
    argv.push_back("preflight");
  } else {
#ifdef DLAUNCH_HAVE_TRAIN
    // An elastic job's world is known only after its rendezvous.
    const int world = o.min_nodes == 0 || o.min_nodes == o.nnodes ? o.nproc * o.nnodes : 0;
    if (worker::ValidateTrainArgs(o.program, world).help) {
      // Help is an answer, not a job: printed once, before any rank, coordinator or run directory.
      std::cout << worker::TrainOptionsHelp() << std::flush;
      std::exit(kExitOk);
    }
    argv.push_back("train");
#else
    throw UsageError(
        "this dlaunch was built without libtorch: `train` is not available "
        "(install libtorch-dev and rebuild)");
#endif
  }
  argv.insert(argv.end(), o.program.begin(), o.program.end());
  return argv;
}

bool PrintBuiltinHelp(const LaunchOptions& o) {
  if (o.command != Command::kPreflight || !worker::ParsePreflightArgs(o.program).help) return false;
  std::cout << worker::PreflightUsage() << std::endl;
  return true;
}

bool BuiltinPrintsDocument(const LaunchOptions& o) {
  if (o.command != Command::kPreflight) return false;
  return worker::ParsePreflightArgs(o.program).format != worker::OutputFormat::kText;
}

std::string BuiltinFailureReport(const LaunchOptions& o, const RankOutcome& failed,
                                 const std::string& run_dir) {
  if (o.command != Command::kPreflight || BuiltinExitCode(failed) != kExitUnhealthy) return "";
  return worker::PreflightFailureReport(run_dir);
}

void SweepBuiltinLeftovers(const LaunchOptions& o) {
#ifdef DLAUNCH_HAVE_TRAIN
  if (o.command != Command::kTrain) return;
  try {
    const worker::TrainOptions t = worker::ParseTrainOptions(o.program);
    if (!t.checkpoint_dir.empty()) worker::RemoveStaleCheckpointTemps(t.checkpoint_dir);
  } catch (const std::exception&) {  // checked before the start; nothing to sweep otherwise
  }
#else
  (void)o;
#endif
}

void CheckDoctorBeforeStart() {
  auto problems = DoctorFatalProblems();
  if (problems.empty()) return;
  std::string message = "doctor found problems that would break this job:";
  for (const auto& p : problems) message += "\n  ✗ " + p;
  message += "\n(run `dlaunch doctor` for the full report; --skip-doctor starts anyway)";
  throw UsageError(message);
}

int BuiltinExitCode(const RankOutcome& failed) {
  if (failed.exited && failed.signal == 0) {
    if (failed.exit_code == kExitHang) return kExitHang;
    if (failed.exit_code == kExitUnhealthy) return kExitUnhealthy;
  }
  return kExitRankFailed;
}

std::string DoctorFingerprint() { return DoctorFingerprintJson(); }

std::vector<std::string> CompareDoctorFingerprints(const std::vector<std::string>& per_node) {
  return CompareFingerprints(per_node);
}

int RunDoctor(const std::vector<std::string>& args) { return RunDoctorCommand(args); }

int RunDiagnose(const std::vector<std::string>& args) { return RunDiagnoseCommand(args); }

}  // namespace dlaunch::launcher
