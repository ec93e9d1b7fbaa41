// Training checkpoints: model, optimizer state, step and RNG state in one file, written by rank 0
// through a temporary file and rename(2), so a crash mid-write never replaces the last good one.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <optional>
#include <string>

namespace dlaunch::worker {

struct CheckpointMeta {
  int64_t step = 0;  // optimizer steps completed; the sampler position follows from it
  uint64_t seed = 0;
  int64_t world_size = 0;
  int64_t global_batch = 0;  // batch * grad_accum * world_size: resuming with another is refused
  std::string model;
};

// <dir>/checkpoint.pt
std::string CheckpointPath(const std::string& dir);

// Blocks for the write. Creates `dir` if needed. Throws Error(kInternal) naming the path on
// failure; the previous checkpoint is then untouched.
void SaveCheckpoint(const std::string& dir, const CheckpointMeta& meta, torch::nn::Module& model,
                    torch::optim::Optimizer& optimizer);

// Returns nullopt when no checkpoint exists. Blocks for the read. Throws Error(kInternal) for an
// unreadable file and UsageError when it was written for another model or global batch.
std::optional<CheckpointMeta> LoadCheckpoint(const std::string& dir, const CheckpointMeta& expect,
                                             torch::nn::Module& model,
                                             torch::optim::Optimizer& optimizer);

}  // namespace dlaunch::worker
