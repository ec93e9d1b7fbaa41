// The gloo backend's out-of-place forms and rooted collectives (reduce, gather, scatter): the
// ops nccl-tests measures beyond the ones training needs.
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>

#include <cstring>

#include "core/comm/gloo_communicator.h"
#include "core/comm/gloo_ops.h"
#include "core/comm/reduce_kernels.h"
#include "core/error.h"

namespace dlaunch::core {
namespace {

// gloo's typed setters only use the element width: runs fn with a zero value of an unsigned
// type of that width.
template <typename Fn>
void WithElementWidth(DataType dtype, Fn&& fn) {
  switch (DataTypeSize(dtype)) {
    case 1:
      return fn(uint8_t{});
    case 2:
      return fn(uint16_t{});
    case 4:
      return fn(uint32_t{});
    default:
      return fn(uint64_t{});
  }
}

}  // namespace

// gloo's reduce (a ring reduce-scatter, then the blocks sent to the root) uses the output as its
// accumulator on every rank, so every rank passes one.
void GlooCommunicator::RunReduce(Buffer in, Buffer out, ReduceOp op, int root, uint32_t tag) {
  if (in.bytes() == 0) return;
  if (in.ptr != out.ptr) std::memcpy(out.ptr, in.ptr, in.bytes());
  if (size_ > 1) {
    ReduceFn fn = GetReduceFn(in.dtype, op);
    WithElementWidth(in.dtype, [&](auto zero) {
      using T = decltype(zero);
      gloo::ReduceOptions opts(context_);
      opts.setOutput(static_cast<T*>(out.ptr), out.count);
      opts.setRoot(root);
      opts.setReduceFunction(fn);
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      gloo::reduce(opts);
    });
  }
  if (op == ReduceOp::kAvg && rank_ == root) DivideInPlace(out.ptr, out.count, out.dtype, size_);
}

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
  return Enqueue({seq}, "reduce",
                 [this, in, out, op, root, tag = NextTag()] { RunReduce(in, out, op, root, tag); });
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

}  // namespace dlaunch::core
