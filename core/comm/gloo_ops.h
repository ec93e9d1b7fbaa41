// Gloo's collectives on any gloo context - the world's, or the one that joins the hosts' leaders
// in the shared-memory transport. Each blocks for at most `timeout` and throws gloo's exceptions.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/comm/communicator.h"

namespace gloo {
class Context;
}

namespace dlaunch::core::gloo_ops {

using ContextPtr = std::shared_ptr<gloo::Context>;
using std::chrono::milliseconds;

// In place. kAvg divides by the context's size.
void AllReduce(const ContextPtr& ctx, Buffer buf, ReduceOp op, uint32_t tag, milliseconds timeout);
// in: size * out.count elements; out: this rank's reduced block.
void ReduceScatter(const ContextPtr& ctx, Buffer in, Buffer out, ReduceOp op, uint32_t tag,
                   milliseconds timeout);
// out (on every rank, as gloo's accumulator) receives the reduction at root; kAvg divides there.
void Reduce(const ContextPtr& ctx, Buffer in, Buffer out, ReduceOp op, int root, uint32_t tag,
            milliseconds timeout);
void Broadcast(const ContextPtr& ctx, void* ptr, size_t bytes, int root, uint32_t tag,
               milliseconds timeout);
// out: size * in_bytes bytes.
void AllGather(const ContextPtr& ctx, const void* in, size_t in_bytes, void* out, uint32_t tag,
               milliseconds timeout);
void AllToAll(const ContextPtr& ctx, Buffer in, Buffer out, uint32_t tag, milliseconds timeout);
// in_counts / out_counts: elements per rank, blocks consecutive in rank order.
void AllToAllV(const ContextPtr& ctx, Buffer in, const std::vector<size_t>& in_counts, Buffer out,
               const std::vector<size_t>& out_counts, uint32_t tag, milliseconds timeout);
void Barrier(const ContextPtr& ctx, uint32_t tag, milliseconds timeout);

}  // namespace dlaunch::core::gloo_ops
