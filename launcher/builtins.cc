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

// What a rank would find only once it asks CUDA: on a machine whose driver lists no GPU at all,
// the nccl backend (given, or chosen by --backend auto) cannot run.
void CheckPreflightBackend(const std::vector<std::string>& args, int world_size) {
  const worker::PreflightOptions p = worker::ParsePreflightArgs(args, world_size);
  if (p.help || CountGpus() > 0) return;
  if (p.backend == "nccl") {
    throw UsageError("preflight: --backend nccl, but this machine has no GPU (" +
                     std::string(kNvidiaGpuList) + " is empty or absent): use --backend gloo");
  }
  worker::CheckBackendFlags(p, "gloo");  // -G and -R under --backend auto
}

}  // namespace

std::vector<std::string> BuiltinWorkerArgv(const LaunchOptions& o, const std::string& self_exe) {
  // The user's input first: its error is the one to fix, whatever else is missing.
  std::vector<std::string> argv = {""};
  if (o.command == Command::kPreflight) {
    CheckPreflightBackend(o.program, o.nproc * o.nnodes);
    argv.push_back("preflight");
  } else {
#ifdef DLAUNCH_HAVE_TRAIN
    // An elastic job's world is known only after its rendezvous; its fewest ranks are not.
    const bool elastic = o.min_nodes != 0 && o.min_nodes != o.nnodes;
    const int world = elastic ? 0 : o.nproc * o.nnodes;
    const worker::TrainOptions t =
        worker::ValidateTrainArgs(o.program, world, elastic ? o.nproc * o.min_nodes : 0);
    if (t.help) {
      // Help is an answer, not a job: printed once, before any rank, coordinator or run directory.
      std::cout << worker::TrainOptionsHelp() << std::flush;
      std::exit(kExitOk);
    }
    if (t.device == "cuda" && CountGpus() == 0) {
      throw UsageError("train: --device cuda, but this machine has no GPU (" +
                       std::string(kNvidiaGpuList) + " is empty or absent)");
    }
    argv.push_back("train");
#else
    throw UsageError(
        "this dlaunch was built without libtorch: `train` is not available "
        "(install libtorch-dev and rebuild)");
#endif
  }
  argv.front() = FindWorker(self_exe);
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
