// `dlaunch train`: DDP training of a built-in model, run by dlaunch-worker (needs libtorch; a
// build without it refuses the command before any rank starts).
#pragma once

#include <string>
#include <vector>

#include "launcher/cli/options.h"
#include "launcher/program/worker_program.h"

namespace dlaunch::launcher {

class TrainProgram : public WorkerProgram {
 public:
  TrainProgram(LaunchOptions options, std::string self_exe);

  // `train --help`: prints train's options. Throws UsageError for bad arguments.
  bool PrintHelp() const override;
  // The worker and train's arguments, checked against the world size (an elastic job's fewest
  // ranks). Throws UsageError for bad arguments, --device cuda without a GPU, or a build without
  // libtorch. Blocks for reading the data's headers and the GPU list.
  std::vector<std::string> ResolveArgv() const override;
  // Removes the checkpoint.pt.tmp.<pid> that a rank 0 killed while writing left in
  // --checkpoint-dir. Blocks for a directory scan; never throws.
  void AfterAttempt() const override;
};

}  // namespace dlaunch::launcher
