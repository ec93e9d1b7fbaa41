// Data-parallel training over a dlaunch Communicator, with PyTorch DDP's semantics: parameters are
// broadcast from rank 0 at construction; during backward, gradients are copied into buckets (about
// --bucket-mb each, in reverse parameter order) whose all-reduce starts as soon as the bucket's
// last gradient is accumulated, so communication overlaps the rest of backward; when backward ends
// the averaged gradients are written back to each parameter's .grad(). Inside a NoSync scope
// gradients only accumulate locally, for gradient accumulation without communication. A world of
// one hooks nothing and communicates nothing.
//
// Usage:
//   DistributedDataParallel ddp(model->parameters(), comm);
//   loss.backward();   // returns with averaged gradients
//   optimizer.step();
#pragma once

#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "core/comm/communicator.h"
#include "ddp/bucket_plan.h"

namespace torch::autograd {
struct Node;
}

namespace dlaunch::ddp {

// The communicator's view of a contiguous tensor: its memory, element count, dtype and device.
// Throws Error(kInvalidArgument) for a dtype the communicators do not carry.
core::Buffer TensorBuffer(const torch::Tensor& t);

struct DdpOptions {
  double bucket_cap_mb = 25.0;
  // How long one bucket's all-reduce may take before the wait throws Error(kTimeout).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

// Communication counters since the last TakeStats().
struct DdpStats {
  int64_t bytes_communicated = 0;  // payload bytes handed to collectives
  int64_t collectives = 0;
  double comm_wait_ms = 0;  // time the caller was blocked waiting for collectives
};

class DistributedDataParallel {
 public:
  // Blocks for the broadcast of every parameter from rank 0 (bounded by options.timeout).
  // Parameters must be dense float32 tensors on one device, and stay alive as long as this object.
  DistributedDataParallel(std::vector<torch::Tensor> parameters,
                          std::shared_ptr<core::Communicator> comm, DdpOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // While alive, backward passes skip communication (gradients accumulate locally).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.require_sync_) {
      ddp_.require_sync_ = false;
    }
    ~NoSync() { ddp_.require_sync_ = previous_; }

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };

  // Blocks for one broadcast per bucket from rank 0. Called by the constructor; call again after
  // loading a checkpoint on rank 0 only.
  void BroadcastParameters();

  // If the last backward failed inside gradient synchronisation (a collective timed out, a peer
  // died), rethrows that error with its dlaunch ErrorKind; the autograd engine only passes on its
  // message. Does not block.
  void RethrowSyncError();

  DdpStats TakeStats();
  const std::vector<Bucket>& buckets() const { return buckets_; }
  core::Communicator& communicator() { return *comm_; }

 private:
  void OnGradientReady(size_t param);
  void LaunchReadyBuckets();
  void FinishBackward();
  void WaitTimed(core::Work& work);

  std::vector<torch::Tensor> params_;
  std::shared_ptr<core::Communicator> comm_;
  DdpOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<torch::Tensor> flat_;  // one flat buffer per bucket
  std::vector<size_t> bucket_of_;    // param -> bucket
  std::vector<size_t> slot_of_;      // param -> position within its bucket
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;

  std::mutex mu_;
  bool require_sync_ = true;
  bool backward_active_ = false;
  std::vector<char> param_ready_;
  std::vector<size_t> pending_;  // per bucket: gradients still missing
  size_t next_launch_ = 0;
  std::vector<std::shared_ptr<core::Work>> works_;
  std::exception_ptr sync_error_;
  DdpStats stats_;
};

}  // namespace dlaunch::ddp
