// Training checkpoints: model, optimizer state, step and RNG state in one file, written by rank 0
// atomically (checkpoint_file.h), so a crash mid-write never replaces the last good one. The file
// carries a manifest (batch, world size, every parameter's shape) that is checked, with every
// entry's CRC-32, before anything is loaded.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <optional>
#include <string>

#include "worker/train/checkpoint_file.h"

namespace dlaunch::worker {

// Blocks for the write. Creates `dir` if needed and removes what killed writers left there.
// `meta.shapes` is filled from the model. Throws Error(kInternal) naming the path on failure; the
// previous checkpoint is then untouched.
void SaveCheckpoint(const std::string& dir, CheckpointManifest meta, torch::nn::Module& model,
                    torch::optim::Optimizer& optimizer);

// Returns nullopt when no checkpoint exists. Blocks for the read. Throws UsageError ("train:
// checkpoint PATH: ...") for a damaged file, one written for another model, shape or batch (see
// CheckpointMismatch; `expect` gives this run's key and batches), before anything is loaded;
// Error(kInternal) when torch cannot read what passed the checks. A checkpoint of an older
// dlaunch (no manifest) comes back with steps_per_epoch 0: resumable only on the same world.
std::optional<CheckpointManifest> LoadCheckpoint(const std::string& dir,
                                                 const CheckpointManifest& expect,
                                                 torch::nn::Module& model,
                                                 torch::optim::Optimizer& optimizer);

}  // namespace dlaunch::worker
