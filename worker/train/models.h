// The built-in models of `train`. The mlp has no batch norm, so N ranks with batch b train
// exactly like one rank with batch N*b (the DDP equivalence the tests check); cnn and resnet
// normalise per rank's batch, as PyTorch's DDP does without SyncBatchNorm.
#pragma once

#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <string>

namespace dlaunch::worker {

struct ModelShape {
  int64_t feature_dim = 0;        // values per sample
  int64_t height = 0, width = 0;  // image models: 1 x height x width (0: feature_dim is a square)
  int64_t classes = 0;
  int64_t hidden = 256;  // mlp width
  // Fully connected layers as 1 x 1 convolutions, which libtorch runs on oneDNN on the CPU rather
  // than on the BLAS it links (Debian's: the reference netlib one, 4-5x slower at these sizes).
  // Same parameters, initialisation and checkpoint layout; only the kernel differs.
  bool onednn_linear = false;
};

// Throws UsageError for an unknown name or a shape the model cannot take. Does not block.
// Initialisation draws from torch's global generator: seed it first for reproducible weights.
//   cnn:    [conv3x3 32, BN, ReLU, maxpool 2] [conv3x3 64, BN, ReLU, maxpool 2] fc 128, fc classes
//           (computed as BN, maxpool, ReLU: the same values and gradients, less work)
//   resnet: conv3x3 16, BN, ReLU; 3 stages of 2 basic blocks (16, 32, 64 channels; stride 2
//           between stages); global average pool; fc classes (ResNet-20's shape, 3 x 2 blocks)
torch::nn::Sequential MakeModel(const std::string& name, const ModelShape& shape);

}  // namespace dlaunch::worker
