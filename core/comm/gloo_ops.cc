#include "core/comm/gloo_ops.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/context.h>
#include <gloo/reduce.h>
#include <gloo/types.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/comm/reduce_kernels.h"

namespace dlaunch::core::gloo_ops {
namespace {

// Slot prefixes for the traffic we schedule ourselves; gloo's own algorithms use small values.
constexpr uint8_t kReduceScatterSlotPrefix = 0x71;
constexpr uint8_t kSmallAllreduceSlotPrefix = 0x73;

// Up to this much traffic per rank (default 1 MiB), allreduce is latency-bound: one round of
// direct exchanges (every rank sends its buffer to every other) beats the ring's 2(n-1) dependent
// steps, each of which costs a thread wake-up on both ends. DLAUNCH_GLOO_DIRECT_MAX_BYTES
// overrides it (0 turns the direct exchange off).
size_t DirectAllreduceMaxBytes() {
  static const size_t bytes = [] {
    const char* env = std::getenv("DLAUNCH_GLOO_DIRECT_MAX_BYTES");
    return env && *env ? static_cast<size_t>(std::atoll(env)) : size_t{1} << 20;
  }();
  return bytes;
}

constexpr int kDirectAllreduceMaxRanks = 16;

// gloo's typed option setters only use the element width (the reduction is ours): runs fn with a
// zero value of an unsigned type of that width.
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

template <typename T>
void RingAllreduce(const ContextPtr& ctx, void* ptr, size_t count, ReduceFn fn, uint32_t tag,
                   milliseconds timeout) {
  gloo::AllreduceOptions opts(ctx);
  opts.setOutput(static_cast<T*>(ptr), count);
  opts.setReduceFunction(fn);
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::allreduce(opts);
}

// Every rank sends its whole buffer to every peer and reduces the n contributions locally, in
// rank order, so that all ranks compute bit-identical results.
void DirectAllReduce(const ContextPtr& ctx, Buffer buf, ReduceFn fn, uint32_t tag,
                     milliseconds timeout) {
  const int rank = ctx->rank, size = ctx->size;
  const size_t bytes = buf.bytes();
  std::vector<char> incoming(bytes * size);
  auto send_buf = ctx->createUnboundBuffer(buf.ptr, bytes);
  auto recv_buf = ctx->createUnboundBuffer(incoming.data(), incoming.size());
  const uint64_t slot = gloo::Slot::build(kSmallAllreduceSlotPrefix, tag);
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    recv_buf->recv(p, slot, p * bytes, bytes);
  }
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    send_buf->send(p, slot);
  }
  for (int p = 0; p < size - 1; ++p) recv_buf->waitRecv(nullptr, timeout);
  for (int p = 0; p < size - 1; ++p) send_buf->waitSend(nullptr, timeout);
  std::memcpy(incoming.data() + rank * bytes, buf.ptr, bytes);
  std::memcpy(buf.ptr, incoming.data(), bytes);
  for (int p = 1; p < size; ++p) fn(buf.ptr, buf.ptr, incoming.data() + p * bytes, buf.count);
}

}  // namespace

void AllReduce(const ContextPtr& ctx, Buffer buf, ReduceOp op, uint32_t tag, milliseconds timeout) {
  const int size = ctx->size;
  if (buf.count == 0 || size == 1) {
    return;
  }
  ReduceFn fn = GetReduceFn(buf.dtype, op);
  if (size <= kDirectAllreduceMaxRanks && buf.bytes() * (size - 1) <= DirectAllreduceMaxBytes()) {
    DirectAllReduce(ctx, buf, fn, tag, timeout);
  } else {
    WithElementWidth(buf.dtype, [&](auto zero) {
      RingAllreduce<decltype(zero)>(ctx, buf.ptr, buf.count, fn, tag, timeout);
    });
  }
  if (op == ReduceOp::kAvg) DivideInPlace(buf.ptr, buf.count, buf.dtype, size);
}

// Ring reduce-scatter over gloo's unbound buffers (gloo 0.5 has no options-style reduce_scatter).
// Step k sends block (r-k-1) to the right and reduces block (r-k-2) from the left, so after n-1
// steps block r holds everyone's contribution: (n-1)/n of the data crosses each link, the
// bandwidth-optimal amount nccl-tests' busbw factor assumes.
void ReduceScatter(const ContextPtr& ctx, Buffer in, Buffer out, ReduceOp op, uint32_t tag,
                   milliseconds timeout) {
  const int rank = ctx->rank, size = ctx->size;
  const size_t block_bytes = out.bytes();
  if (block_bytes == 0) return;
  if (size == 1) {
    std::memcpy(out.ptr, in.ptr, block_bytes);
    return;
  }
  ReduceFn fn = GetReduceFn(in.dtype, op);
  std::vector<char> scratch(static_cast<char*>(in.ptr), static_cast<char*>(in.ptr) + in.bytes());
  std::vector<char> incoming(block_bytes);
  auto send_buf = ctx->createUnboundBuffer(scratch.data(), scratch.size());
  auto recv_buf = ctx->createUnboundBuffer(incoming.data(), incoming.size());
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;
  auto mod = [&](int v) { return ((v % size) + size) % size; };
  for (int k = 0; k < size - 1; ++k) {
    uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, tag) + static_cast<uint8_t>(k);
    size_t send_block = mod(rank - k - 1);
    size_t recv_block = mod(rank - k - 2);
    recv_buf->recv(left, slot, 0, block_bytes);
    send_buf->send(right, slot, send_block * block_bytes, block_bytes);
    recv_buf->waitRecv(nullptr, timeout);
    send_buf->waitSend(nullptr, timeout);
    char* acc = scratch.data() + recv_block * block_bytes;
    fn(acc, acc, incoming.data(), out.count);
  }
  std::memcpy(out.ptr, scratch.data() + rank * block_bytes, block_bytes);
  if (op == ReduceOp::kAvg) DivideInPlace(out.ptr, out.count, out.dtype, size);
}

// gloo's reduce (a ring reduce-scatter, then the blocks sent to the root) uses the output as its
// accumulator on every rank, so every rank passes one.
void Reduce(const ContextPtr& ctx, Buffer in, Buffer out, ReduceOp op, int root, uint32_t tag,
            milliseconds timeout) {
  if (in.bytes() == 0) return;
  if (in.ptr != out.ptr) std::memcpy(out.ptr, in.ptr, in.bytes());
  if (ctx->size > 1) {
    ReduceFn fn = GetReduceFn(in.dtype, op);
    WithElementWidth(in.dtype, [&](auto zero) {
      using T = decltype(zero);
      gloo::ReduceOptions opts(ctx);
      opts.setOutput(static_cast<T*>(out.ptr), out.count);
      opts.setRoot(root);
      opts.setReduceFunction(fn);
      opts.setTag(tag);
      opts.setTimeout(timeout);
      gloo::reduce(opts);
    });
  }
  if (op == ReduceOp::kAvg && ctx->rank == root) {
    DivideInPlace(out.ptr, out.count, out.dtype, ctx->size);
  }
}

void Broadcast(const ContextPtr& ctx, void* ptr, size_t bytes, int root, uint32_t tag,
               milliseconds timeout) {
  if (bytes == 0 || ctx->size == 1) return;
  gloo::BroadcastOptions opts(ctx);
  opts.setOutput(static_cast<uint8_t*>(ptr), bytes);
  opts.setRoot(root);
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::broadcast(opts);
}

void AllGather(const ContextPtr& ctx, const void* in, size_t in_bytes, void* out, uint32_t tag,
               milliseconds timeout) {
  if (in_bytes == 0) return;
  if (ctx->size == 1) {
    std::memmove(out, in, in_bytes);
    return;
  }
  gloo::AllgatherOptions opts(ctx);
  opts.setInput(static_cast<uint8_t*>(const_cast<void*>(in)), in_bytes);
  opts.setOutput(static_cast<uint8_t*>(out), in_bytes * ctx->size);
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::allgather(opts);
}

void AllToAll(const ContextPtr& ctx, Buffer in, Buffer out, uint32_t tag, milliseconds timeout) {
  if (in.bytes() == 0) return;
  if (ctx->size == 1) {
    std::memmove(out.ptr, in.ptr, in.bytes());
    return;
  }
  gloo::AlltoallOptions opts(ctx);
  opts.setInput(static_cast<uint8_t*>(in.ptr), in.bytes());
  opts.setOutput(static_cast<uint8_t*>(out.ptr), out.bytes());
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::alltoall(opts);
}

void AllToAllV(const ContextPtr& ctx, Buffer in, const std::vector<size_t>& in_counts, Buffer out,
               const std::vector<size_t>& out_counts, uint32_t tag, milliseconds timeout) {
  // Nothing to send and nothing to receive: no peer expects a message from this rank.
  if (in.bytes() == 0 && out.bytes() == 0) return;
  if (ctx->size == 1) {
    std::memmove(out.ptr, in.ptr, in.bytes());
    return;
  }
  // gloo counts in elements of the pointer's type; bytes keep one call for every dtype.
  const size_t elt = DataTypeSize(in.dtype);
  auto bytes = [elt](const std::vector<size_t>& counts) {
    std::vector<int64_t> out;
    for (size_t c : counts) out.push_back(static_cast<int64_t>(c * elt));
    return out;
  };
  gloo::AlltoallvOptions opts(ctx);
  opts.setInput(static_cast<uint8_t*>(in.ptr), bytes(in_counts));
  opts.setOutput(static_cast<uint8_t*>(out.ptr), bytes(out_counts));
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::alltoallv(opts);
}

void Barrier(const ContextPtr& ctx, uint32_t tag, milliseconds timeout) {
  if (ctx->size == 1) return;
  gloo::BarrierOptions opts(ctx);
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::barrier(opts);
}

}  // namespace dlaunch::core::gloo_ops
