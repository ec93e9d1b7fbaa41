#include "launcher/program/train_program.h"

#include <iostream>

#include "core/base/proc.h"
#include "core/error.h"
#ifdef DLAUNCH_HAVE_TRAIN
#include "worker/train/checkpoint_file.h"
#include "worker/train/train_options.h"
#endif

namespace dlaunch::launcher {

TrainProgram::TrainProgram(LaunchOptions options, std::string self_exe)
    : WorkerProgram(std::move(options), std::move(self_exe)) {}

#ifdef DLAUNCH_HAVE_TRAIN

bool TrainProgram::PrintHelp() const {
  if (!worker::ParseTrainOptions(options().program).help) return false;
  std::cout << worker::TrainOptionsHelp() << std::flush;
  return true;
}

std::vector<std::string> TrainProgram::ResolveArgv() const {
  const LaunchOptions& o = options();
  // An elastic job's world is known only after its rendezvous; its fewest ranks are not.
  const bool elastic = o.min_nodes != 0 && o.min_nodes != o.nnodes;
  const int world = elastic ? 0 : o.nproc * o.nnodes;
  const worker::TrainOptions t =
      worker::ValidateTrainArgs(o.program, world, elastic ? o.nproc * o.min_nodes : 0);
  if (t.device == "cuda" && base::CountGpus() == 0) {
    throw UsageError("train: --device cuda, but this machine has no GPU (" +
                     std::string(base::kNvidiaGpuList) + " is empty or absent)");
  }
  return WorkerArgv("train");
}

void TrainProgram::AfterAttempt() const {
  try {
    const worker::TrainOptions t = worker::ParseTrainOptions(options().program);
    if (!t.checkpoint_dir.empty()) worker::RemoveStaleCheckpointTemps(t.checkpoint_dir);
  } catch (const std::exception&) {  // checked before the start; nothing to sweep otherwise
  }
}

#else

namespace {
UsageError NoTrain() {
  return UsageError(
      "this dlaunch was built without libtorch: `train` is not available "
      "(install libtorch-dev and rebuild)");
}
}  // namespace

bool TrainProgram::PrintHelp() const { throw NoTrain(); }
std::vector<std::string> TrainProgram::ResolveArgv() const { throw NoTrain(); }
void TrainProgram::AfterAttempt() const {}

#endif

}  // namespace dlaunch::launcher
