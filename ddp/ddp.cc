#include "ddp/ddp.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <string>

#include "core/error.h"

namespace dlaunch::ddp {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

core::Buffer TensorBuffer(const torch::Tensor& t) {
  core::Buffer b;
  b.ptr = t.data_ptr();
  b.count = static_cast<size_t>(t.numel());
  switch (t.scalar_type()) {
    case torch::kFloat32:
      b.dtype = core::DataType::kFloat32;
      break;
    case torch::kFloat64:
      b.dtype = core::DataType::kFloat64;
      break;
    case torch::kFloat16:
      b.dtype = core::DataType::kFloat16;
      break;
    case torch::kBFloat16:
      b.dtype = core::DataType::kBFloat16;
      break;
    case torch::kInt32:
      b.dtype = core::DataType::kInt32;
      break;
    case torch::kInt64:
      b.dtype = core::DataType::kInt64;
      break;
    case torch::kUInt8:
      b.dtype = core::DataType::kUint8;
      break;
    case torch::kInt8:
      b.dtype = core::DataType::kInt8;
      break;
    default:
      throw Error(ErrorKind::kInvalidArgument, std::string("no communicator dtype for a ") +
                                                   c10::toString(t.scalar_type()) + " tensor");
  }
  b.device = t.is_cuda() ? core::DeviceType::kCuda : core::DeviceType::kCpu;
  b.device_index = t.is_cuda() ? t.get_device() : 0;
  return b;
}

DistributedDataParallel::DistributedDataParallel(std::vector<torch::Tensor> parameters,
                                                 std::shared_ptr<core::Communicator> comm,
                                                 DdpOptions options)
    : params_(std::move(parameters)), comm_(std::move(comm)), options_(options) {
  std::vector<size_t> sizes;
  for (size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor& p = params_[i];
    if (p.scalar_type() != torch::kFloat32 || !p.is_contiguous()) {
      throw Error(ErrorKind::kInvalidArgument, "DistributedDataParallel: parameter " +
                                                   std::to_string(i) +
                                                   " is not a contiguous float32 tensor");
    }
    sizes.push_back(static_cast<size_t>(p.numel()));
  }
  size_t cap = static_cast<size_t>(options_.bucket_cap_mb * 1024 * 1024);
  buckets_ = PlanBuckets(sizes, sizeof(float), std::max<size_t>(cap, 1));
  bucket_of_.resize(params_.size());
  slot_of_.resize(params_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t s = 0; s < buckets_[b].params.size(); ++s) {
      bucket_of_[buckets_[b].params[s]] = b;
      slot_of_[buckets_[b].params[s]] = s;
    }
    auto device = params_.empty() ? torch::Device(torch::kCPU) : params_[0].device();
    flat_.push_back(torch::zeros({static_cast<int64_t>(buckets_[b].elements)},
                                 torch::TensorOptions().dtype(torch::kFloat32).device(device)));
  }
  param_ready_.assign(params_.size(), 0);
  pending_.resize(buckets_.size());

  // A world of one has nothing to exchange: its gradients are already the average.
  if (comm_->size() == 1) return;
  BroadcastParameters();

  // The hook sits on each parameter's AccumulateGrad node (as c10d's Reducer does), so it fires
  // after .grad() holds the accumulated gradient, including earlier NoSync micro-batches.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].requires_grad()) continue;
    auto acc = torch::autograd::impl::grad_accumulator(params_[i]);
    uintptr_t key = acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, i](const torch::autograd::variable_list& outputs,
                  const torch::autograd::variable_list&) {
          OnGradientReady(i);
          return outputs;
        }));
    accumulators_.push_back(acc);
    hook_keys_.push_back(key);
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
  // Collectives still running write into flat_: let them finish (or fail) before it goes away.
  for (auto& w : works_) {
    try {
      if (w) w->Wait(options_.timeout);
    } catch (...) {
    }
  }
}

void DistributedDataParallel::WaitTimed(core::Work& work) {
  auto start = Clock::now();
  work.Wait(options_.timeout);
  stats_.comm_wait_ms += std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void DistributedDataParallel::BroadcastParameters() {
  torch::NoGradGuard no_grad;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bucket = buckets_[b];
    for (size_t s = 0; s < bucket.params.size(); ++s) {
      const torch::Tensor& p = params_[bucket.params[s]];
      flat_[b].narrow(0, bucket.offsets[s], p.numel()).copy_(p.reshape({-1}));
    }
    auto work = comm_->Broadcast(TensorBuffer(flat_[b]), 0);
    WaitTimed(*work);
    stats_.bytes_communicated += flat_[b].numel() * sizeof(float);
    stats_.collectives++;
    for (size_t s = 0; s < bucket.params.size(); ++s) {
      torch::Tensor p = params_[bucket.params[s]];
      p.copy_(flat_[b].narrow(0, bucket.offsets[s], p.numel()).view_as(p));
    }
  }
}

void DistributedDataParallel::OnGradientReady(size_t param) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!require_sync_) return;
  if (!backward_active_) {
    backward_active_ = true;
    std::fill(param_ready_.begin(), param_ready_.end(), 0);
    for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].params.size();
    next_launch_ = 0;
    works_.assign(buckets_.size(), nullptr);
    sync_error_ = nullptr;
    torch::autograd::Engine::get_default_engine().queue_callback([this] { FinishBackward(); });
  }
  if (param_ready_[param]) return;  // a parameter used twice fires once per use
  param_ready_[param] = 1;
  size_t b = bucket_of_[param];
  const torch::Tensor& grad = params_[param].grad();
  torch::NoGradGuard no_grad;
  flat_[b].narrow(0, buckets_[b].offsets[slot_of_[param]], grad.numel()).copy_(grad.reshape({-1}));
  if (--pending_[b] == 0) LaunchReadyBuckets();
}

// Buckets start strictly in index order, so every rank issues the same collective sequence even if
// its autograd engine finished gradients in another order.
void DistributedDataParallel::LaunchReadyBuckets() {
  while (next_launch_ < buckets_.size() && pending_[next_launch_] == 0) {
    size_t b = next_launch_++;
    // Divide before the sum, as DDP does, so the reduction cannot overflow in low precision.
    flat_[b].div_(static_cast<double>(comm_->size()));
    works_[b] = comm_->AllReduce(TensorBuffer(flat_[b]), core::ReduceOp::kSum);
    stats_.bytes_communicated += flat_[b].numel() * sizeof(float);
    stats_.collectives++;
  }
}

void DistributedDataParallel::FinishBackward() {
  std::lock_guard<std::mutex> lock(mu_);
  backward_active_ = false;
  try {
    torch::NoGradGuard no_grad;
    // Parameters that took no part in this forward get a zero gradient, so every rank still
    // contributes every bucket (PyTorch needs find_unused_parameters for this).
    for (size_t i = 0; i < params_.size(); ++i) {
      if (param_ready_[i]) continue;
      param_ready_[i] = 1;
      size_t b = bucket_of_[i];
      torch::Tensor slice =
          flat_[b].narrow(0, buckets_[b].offsets[slot_of_[i]], params_[i].numel());
      if (params_[i].grad().defined()) {
        slice.copy_(params_[i].grad().reshape({-1}));
      } else {
        slice.zero_();
      }
      --pending_[b];
    }
    LaunchReadyBuckets();
    for (size_t b = 0; b < buckets_.size(); ++b) {
      WaitTimed(*works_[b]);
      works_[b].reset();
      const Bucket& bucket = buckets_[b];
      for (size_t s = 0; s < bucket.params.size(); ++s) {
        torch::Tensor& p = params_[bucket.params[s]];
        torch::Tensor avg = flat_[b].narrow(0, bucket.offsets[s], p.numel()).view_as(p);
        if (p.grad().defined()) {
          p.mutable_grad().copy_(avg);
        } else {
          p.mutable_grad() = avg.clone();
        }
      }
    }
  } catch (...) {
    sync_error_ = std::current_exception();
    throw;
  }
}

void DistributedDataParallel::RethrowSyncError() {
  std::lock_guard<std::mutex> lock(mu_);
  if (sync_error_) {
    auto e = sync_error_;
    sync_error_ = nullptr;
    std::rethrow_exception(e);
  }
}

DdpStats DistributedDataParallel::TakeStats() {
  std::lock_guard<std::mutex> lock(mu_);
  DdpStats s = stats_;
  stats_ = DdpStats();
  return s;
}

}  // namespace dlaunch::ddp
