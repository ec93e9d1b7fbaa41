// torch.cuda.amp.GradScaler for dlaunch's data-parallel training: the loss is multiplied by a scale
// before backward so fp16 gradients do not underflow; before the optimizer step the gradients are
// divided by it again and checked for inf/NaN. A step whose gradients are not finite on ANY rank
// is skipped on EVERY rank (the flag is all-reduced with max, so ranks never diverge even when a
// collective did not carry the inf), and the scale backs off; after `growth_interval` good steps
// in a row it grows. Works on CPU float tensors as well as CUDA (torch's fused kernels there).
//
// Usage:
//   GradScaler scaler(options, device, comm);
//   scaler.Scale(loss).backward();
//   if (scaler.Unscale(grads)) optimizer.step();   // false: skip, on every rank alike
//   scaler.Update();
#pragma once

#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/comm/communicator.h"

namespace dlaunch::ddp {

struct GradScalerOptions {
  double init_scale = 65536.0;  // torch.cuda.amp.GradScaler's defaults
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  // How long the all-reduce of the inf flag may take before Unscale throws Error(kTimeout).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

class GradScaler {
 public:
  // `comm` may be null (one process): the flag then stays local.
  GradScaler(GradScalerOptions options, torch::Device device,
             std::shared_ptr<core::Communicator> comm);

  // loss x scale. Does not block.
  torch::Tensor Scale(const torch::Tensor& loss) const;

  // Divides every gradient by the scale in place and returns whether all of them, on every rank,
  // are finite (then take the optimizer step). Blocks for one all-reduce of 1 float.
  bool Unscale(const std::vector<torch::Tensor>& grads);

  // After Unscale: halves (backoff_factor) the scale when the step was skipped; multiplies it by
  // growth_factor after growth_interval finite steps in a row (unless that would overflow).
  void Update();

  double scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  int64_t skipped_steps() const { return skipped_; }

 private:
  GradScalerOptions options_;
  torch::Device device_;
  std::shared_ptr<core::Communicator> comm_;
  torch::Tensor found_inf_;  // 1 float on the device: 1 when a gradient was not finite
  double scale_;
  int64_t growth_tracker_ = 0;
  bool last_found_inf_ = false;
  int64_t skipped_ = 0;
};

}  // namespace dlaunch::ddp
