// The gloo backend's out-of-place forms, rooted collectives (reduce, gather, scatter) and
// alltoallv: the ops nccl-tests and PyTorch measure beyond the ones training needs.
#include <gloo/gather.h>
#include <gloo/scatter.h>

#include <cstring>

#include "core/comm/gloo_communicator.h"
#include "core/comm/gloo_ops.h"
#include "core/error.h"

namespace dlaunch::core {

// The out-of-place forms copy the input into the output as the first step of the op (gloo's own
// out-of-place allreduce does the same), so the copy is part of what a caller times.
std::shared_ptr<Work> GlooCommunicator::AllReduce(Buffer in, Buffer out, ReduceOp op) {
  check_.Alike("allreduce", in, out);
  int64_t seq = recorder_.Record("allreduce", in.dtype, in.count, in.bytes());
  return Enqueue({seq}, "allreduce", [this, in, out, op, tag = NextTag()] {
    if (in.ptr != out.ptr) std::memcpy(out.ptr, in.ptr, in.bytes());
    if (hierarchical_) return RunHierAllReduce(out, op, tag);
    gloo_ops::AllReduce(context_, out, op, tag, timeout_);
  });
}

std::shared_ptr<Work> GlooCommunicator::Broadcast(Buffer in, Buffer out, int root) {
  check_.Alike("broadcast", in, out);
  check_.Root("broadcast", root);
  int64_t seq = recorder_.Record("broadcast", out.dtype, out.count, out.bytes(), -1, root);
  return Enqueue({seq}, "broadcast", [this, in, out, root, tag = NextTag()] {
    if (rank_ == root && in.ptr != out.ptr) std::memcpy(out.ptr, in.ptr, in.bytes());
    if (hierarchical_) return RunHierBroadcast(out, root, tag);
    gloo_ops::Broadcast(context_, out.ptr, out.bytes(), root, tag, timeout_);
  });
}

std::shared_ptr<Work> GlooCommunicator::Reduce(Buffer in, Buffer out, ReduceOp op, int root) {
  check_.Alike("reduce", in, out);
  check_.Root("reduce", root);
  int64_t seq = recorder_.Record("reduce", in.dtype, in.count, in.bytes(), -1, root);
  return Enqueue({seq}, "reduce", [this, in, out, op, root, tag = NextTag()] {
    gloo_ops::Reduce(context_, in, out, op, root, tag, timeout_);
  });
}

std::shared_ptr<Work> GlooCommunicator::Gather(Buffer in, Buffer out, int root) {
  check_.Gather(in, out, root);
  int64_t seq = recorder_.Record("gather", in.dtype, in.count, in.bytes() * size_, -1, root);
  return Enqueue({seq}, "gather", [this, in, out, root, tag = NextTag()] {
    if (in.bytes() == 0) return;
    if (size_ == 1) {
      std::memmove(out.ptr, in.ptr, in.bytes());
      return;
    }
    gloo::GatherOptions opts(context_);
    opts.setInput(static_cast<uint8_t*>(in.ptr), in.bytes());
    if (rank_ == root) opts.setOutput(static_cast<uint8_t*>(out.ptr), out.bytes());
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::gather(opts);
  });
}

std::shared_ptr<Work> GlooCommunicator::Scatter(Buffer in, Buffer out, int root) {
  check_.Scatter(in, out, root);
  int64_t seq = recorder_.Record("scatter", out.dtype, out.count, out.bytes() * size_, -1, root);
  return Enqueue({seq}, "scatter", [this, in, out, root, tag = NextTag()] {
    if (out.bytes() == 0) return;
    if (size_ == 1) {
      std::memmove(out.ptr, in.ptr, out.bytes());
      return;
    }
    gloo::ScatterOptions opts(context_);
    if (rank_ == root) {
      std::vector<uint8_t*> blocks;
      for (int p = 0; p < size_; ++p)
        blocks.push_back(static_cast<uint8_t*>(in.ptr) + p * out.bytes());
      opts.setInputs(blocks, out.bytes());
    }
    opts.setOutput(static_cast<uint8_t*>(out.ptr), out.bytes());
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::scatter(opts);
  });
}

std::shared_ptr<Work> GlooCommunicator::AllToAllV(Buffer in, std::vector<size_t> in_counts,
                                                  Buffer out, std::vector<size_t> out_counts) {
  check_.AllToAllV(in, in_counts, out, out_counts);
  int64_t seq = recorder_.Record("alltoallv", in.dtype, in.count, in.bytes());
  return Enqueue({seq}, "alltoallv",
                 [this, in, out, in_counts = std::move(in_counts),
                  out_counts = std::move(out_counts), tag = NextTag()] {
                   gloo_ops::AllToAllV(context_, in, in_counts, out, out_counts, tag, timeout_);
                 });
}

}  // namespace dlaunch::core
