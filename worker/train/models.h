// The built-in models of `train`: no dropout and no batch norm, so N ranks with batch b train
// exactly like one rank with batch N*b (the DDP equivalence the tests check).
#pragma once

#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <string>

namespace dlaunch::worker {

struct ModelShape {
  int64_t feature_dim = 0;  // floats per sample; a cnn needs a square number (1 x S x S images)
  int64_t classes = 0;
  int64_t hidden = 256;  // mlp width
};

// Throws UsageError for an unknown name or a shape the model cannot take. Does not block.
// Initialisation draws from torch's global generator: seed it first for reproducible weights.
torch::nn::Sequential MakeModel(const std::string& name, const ModelShape& shape);

}  // namespace dlaunch::worker
