#include "ddp/grad_scaler.h"

#include <cmath>

#include "ddp/ddp.h"

namespace dlaunch::ddp {

GradScaler::GradScaler(GradScalerOptions options, torch::Device device,
                       std::shared_ptr<core::Communicator> comm)
    : options_(options),
      device_(device),
      comm_(std::move(comm)),
      found_inf_(torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat32).device(device))),
      scale_(options.init_scale) {}

torch::Tensor GradScaler::Scale(const torch::Tensor& loss) const { return loss * scale_; }

bool GradScaler::Unscale(const std::vector<torch::Tensor>& grads) {
  torch::NoGradGuard no_grad;
  found_inf_.zero_();
  const double inv = 1.0 / scale_;
  if (device_.is_cuda()) {
    // One fused kernel over all gradients, as GradScaler.unscale_ does.
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_,
                                                   torch::full({1}, inv, found_inf_.options()));
  } else {
    // libtorch 1.13 has that kernel for CUDA only: the same arithmetic, one tensor at a time.
    for (const torch::Tensor& g : grads) {
      if (!g.defined()) continue;
      g.mul_(inv);
      found_inf_.add_(torch::isfinite(g).all().logical_not());
    }
  }
  if (comm_ && comm_->size() > 1) {
    comm_->AllReduce(TensorBuffer(found_inf_), core::ReduceOp::kMax)->Wait(options_.timeout);
  }
  last_found_inf_ = found_inf_.item<float>() > 0;
  if (last_found_inf_) ++skipped_;
  return !last_found_inf_;
}

void GradScaler::Update() {
  // at::_amp_update_scale_'s rule, on the host (the skip decision already read the flag).
  if (last_found_inf_) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ == options_.growth_interval) {
    const double grown = scale_ * options_.growth_factor;
    // fp32 holds the scale in torch: growing past its range would make every step overflow.
    if (std::isfinite(static_cast<float>(grown))) scale_ = grown;
    growth_tracker_ = 0;
  }
}

}  // namespace dlaunch::ddp
