// The gloo communicator's shared-memory transport: which ranks share a host, and the
// hierarchical collectives - inside the host on a ShmGroup, between hosts on gloo among the
// hosts' leaders (local rank 0) - reduce inside the host, exchange between hosts, broadcast
// inside the host.
#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include <algorithm>
#include <cstring>

#include "core/comm/gloo_communicator.h"
#include "core/comm/gloo_ops.h"
#include "core/comm/gloo_store_adapter.h"
#include "core/comm/reduce_kernels.h"
#include "core/comm/shm_group.h"
#include "core/error.h"

namespace dlaunch::core {
namespace {

using Clock = std::chrono::steady_clock;

// What is left of an op's time for its step between hosts (gloo wants a positive timeout).
std::chrono::milliseconds Remaining(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

}  // namespace

void GlooCommunicator::SetUpTransport(const CommOptions& options,
                                      const std::shared_ptr<Store>& store,
                                      std::shared_ptr<gloo::transport::Device> device) {
  if (options.transport == "tcp" || size_ == 1) return;
  topology_ = ExchangeTopology(*store, rank_, size_, LocalHostId(options.host_id),
                               options.rendezvous_timeout);
  // One rank per host: nothing for shared memory to carry.
  if (!topology_.AnyShared()) return;
  if (topology_.local_size() > 1) {
    ShmGroupOptions so;
    so.local_rank = topology_.local_rank;
    so.world_ranks = topology_.hosts[topology_.host];
    so.store = MakePrefixStore("shm/host" + std::to_string(topology_.host) + "/", store);
    so.slot_bytes = options.shm_slot_bytes > 0 ? options.shm_slot_bytes : kDefaultShmSlotBytes;
    so.rendezvous_timeout = options.rendezvous_timeout;
    try {
      shm_ = std::make_unique<ShmGroup>(so);
    } catch (const Error& e) {
      throw Error(e.kind(),
                  std::string("shared memory transport: ") + e.what() +
                      (options.transport == "auto" ? " (--transport tcp avoids it)" : ""));
    }
  }
  const int hosts = static_cast<int>(topology_.hosts.size());
  if (hosts > 1 && topology_.leader()) {
    auto context = std::make_shared<gloo::rendezvous::Context>(topology_.host, hosts);
    context->setTimeout(options.rendezvous_timeout);
    GlooStoreAdapter adapter(MakePrefixStore("leaders/", store), options.rendezvous_timeout);
    context->connectFullMesh(adapter, device);
    context->setTimeout(timeout_);
    leaders_ = context;
  }
  hierarchical_ = true;
}

const char* GlooCommunicator::CollectivePath(int peer) const {
  if (!hierarchical_ || peer == rank_) return hierarchical_ ? "shm" : "tcp";
  return topology_.HostOf(peer) == topology_.host ? "shm" : "tcp";
}

bool GlooCommunicator::SharesHost(int peer) const {
  return shm_ && topology_.HostOf(peer) == topology_.host;
}

void GlooCommunicator::RunShmSendRecv(const Buffer* send, int dst, const Buffer* recv, int src) {
  shm_->SendRecv(send ? send->ptr : nullptr, send ? send->bytes() : 0,
                 send ? topology_.LocalIndex(dst) : -1, recv ? recv->ptr : nullptr,
                 recv ? recv->bytes() : 0, recv ? topology_.LocalIndex(src) : -1,
                 Clock::now() + timeout_);
}

void GlooCommunicator::RunHierAllReduce(Buffer buf, ReduceOp op, uint32_t tag) {
  const auto deadline = Clock::now() + timeout_;
  if (topology_.hosts.size() == 1) {
    shm_->AllReduce(buf.ptr, buf.count, buf.dtype, op, op == ReduceOp::kAvg ? size_ : 0, -1,
                    deadline);
    return;
  }
  // An average is a sum everywhere, divided once by the world size at the end.
  const ReduceOp sum_or_op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  if (shm_) shm_->AllReduce(buf.ptr, buf.count, buf.dtype, sum_or_op, 0, 0, deadline);
  if (leaders_) {
    gloo_ops::AllReduce(leaders_, buf, sum_or_op, tag, Remaining(deadline));
    if (op == ReduceOp::kAvg) DivideInPlace(buf.ptr, buf.count, buf.dtype, size_);
  }
  if (shm_) shm_->Broadcast(buf.ptr, buf.count, buf.dtype, 0, deadline);
}

void GlooCommunicator::RunHierBroadcast(Buffer buf, int root, uint32_t tag) {
  const auto deadline = Clock::now() + timeout_;
  const int root_host = topology_.HostOf(root);
  if (topology_.host == root_host && shm_) {
    shm_->Broadcast(buf.ptr, buf.count, buf.dtype, topology_.LocalIndex(root), deadline);
  }
  if (topology_.hosts.size() == 1) return;
  if (leaders_)
    gloo_ops::Broadcast(leaders_, buf.ptr, buf.bytes(), root_host, tag, Remaining(deadline));
  if (topology_.host != root_host && shm_) {
    shm_->Broadcast(buf.ptr, buf.count, buf.dtype, 0, deadline);
  }
}

void GlooCommunicator::RunHierAllGather(Buffer in, Buffer out, uint32_t tag) {
  const auto deadline = Clock::now() + timeout_;
  if (topology_.hosts.size() == 1) {
    // One host: local order is rank order.
    shm_->AllGather(in.ptr, in.count, in.dtype, out.ptr, -1, deadline);
    return;
  }
  // Each leader gathers its host's inputs into a block padded to the largest host, the leaders
  // exchange blocks, and each leader places them in rank order and broadcasts the result.
  const size_t bytes = in.bytes();
  const size_t block = topology_.MaxLocalSize() * bytes;
  std::vector<char> host_block(topology_.leader() ? block : 0);
  if (shm_) {
    shm_->AllGather(in.ptr, in.count, in.dtype, host_block.data(), 0, deadline);
  } else if (bytes > 0) {
    std::memcpy(host_block.data(), in.ptr, bytes);
  }
  if (leaders_ && bytes > 0) {
    std::vector<char> all(block * topology_.hosts.size());
    gloo_ops::AllGather(leaders_, host_block.data(), block, all.data(), tag, Remaining(deadline));
    for (size_t h = 0; h < topology_.hosts.size(); ++h) {
      for (size_t i = 0; i < topology_.hosts[h].size(); ++i) {
        std::memcpy(static_cast<char*>(out.ptr) + topology_.hosts[h][i] * bytes,
                    all.data() + h * block + i * bytes, bytes);
      }
    }
  }
  if (shm_) shm_->Broadcast(out.ptr, out.count, out.dtype, 0, deadline);
}

void GlooCommunicator::RunHierReduceScatter(Buffer in, Buffer out, ReduceOp op, uint32_t tag) {
  if (topology_.hosts.size() == 1) {
    shm_->ReduceScatter(in.ptr, out.ptr, out.count, in.dtype, op, op == ReduceOp::kAvg ? size_ : 0,
                        Clock::now() + timeout_);
    return;
  }
  // Across hosts: an allreduce of a copy, of which this rank keeps its block.
  std::vector<char> scratch(static_cast<const char*>(in.ptr),
                            static_cast<const char*>(in.ptr) + in.bytes());
  RunHierAllReduce(Buffer{scratch.data(), in.count, in.dtype}, op, tag);
  if (out.bytes() > 0) std::memcpy(out.ptr, scratch.data() + rank_ * out.bytes(), out.bytes());
}

void GlooCommunicator::RunHierBarrier(uint32_t tag) {
  const auto deadline = Clock::now() + timeout_;
  if (shm_) shm_->Barrier(deadline);
  if (topology_.hosts.size() == 1) return;
  if (leaders_) gloo_ops::Barrier(leaders_, tag, Remaining(deadline));
  if (shm_) shm_->Barrier(deadline);
}

}  // namespace dlaunch::core
