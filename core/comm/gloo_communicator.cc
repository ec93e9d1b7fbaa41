#include "core/comm/gloo_communicator.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "core/base/proc.h"
#include "core/comm/gloo_store_adapter.h"
#include "core/comm/reduce_kernels.h"
#include "core/error.h"

namespace dlaunch::core {
namespace {

// Slot prefixes for the traffic we schedule ourselves; gloo's own algorithms use small values.
constexpr uint8_t kReduceScatterSlotPrefix = 0x71;
constexpr uint8_t kP2PSlotPrefix = 0x72;
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

// Maps a gloo exception to our error kinds without losing its text.
ErrorKind ClassifyGlooError(const std::string& what) {
  if (what.find("Timed out") != std::string::npos || what.find("timed out") != std::string::npos) {
    return ErrorKind::kTimeout;
  }
  if (what.find("closed") != std::string::npos || what.find("reset") != std::string::npos ||
      what.find("Broken pipe") != std::string::npos || what.find("refused") != std::string::npos) {
    return ErrorKind::kPeerGone;
  }
  return ErrorKind::kInternal;
}

gloo::transport::tcp::attr DeviceAttr(const CommOptions& options) {
  gloo::transport::tcp::attr attr;
  if (!options.iface.empty()) {
    attr.iface = options.iface;
  } else if (!options.hostname.empty()) {
    attr.hostname = options.hostname;
  } else if (const char* env = std::getenv("GLOO_SOCKET_IFNAME"); env && *env) {
    attr.iface = env;
  } else if (const char* master = std::getenv("MASTER_ADDR");
             master && *master && std::string(master) != "127.0.0.1" &&
             std::string(master) != "localhost" && std::string(master) != "::1") {
    // A job spanning hosts: bind to this host's name as torch's gloo does, so that peers on
    // other nodes can reach us.
    attr.hostname = base::Hostname();
  } else {
    attr.hostname = "127.0.0.1";
  }
  return attr;
}

// gloo's typed option setters only need the element width; the reduction is ours.
template <typename T>
void GlooAllreduce(const std::shared_ptr<gloo::Context>& ctx, void* ptr, size_t count, ReduceFn fn,
                   uint32_t tag, std::chrono::milliseconds timeout) {
  gloo::AllreduceOptions opts(ctx);
  opts.setOutput(static_cast<T*>(ptr), count);
  opts.setReduceFunction(fn);
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::allreduce(opts);
}

}  // namespace

GlooCommunicator::GlooCommunicator(const CommOptions& options)
    : rank_(options.rank),
      size_(options.size),
      timeout_(options.timeout),
      recorder_(options.rank, options.size, "gloo", options.flight_recorder_capacity) {
  if (size_ < 1 || rank_ < 0 || rank_ >= size_) {
    throw UsageError("invalid rank " + std::to_string(rank_) + " for world size " +
                     std::to_string(size_));
  }
  std::shared_ptr<Store> store = options.store ? options.store : MakeMemoryStore();
  try {
    auto device = gloo::transport::tcp::CreateDevice(DeviceAttr(options));
    auto context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    context->setTimeout(options.rendezvous_timeout);
    GlooStoreAdapter adapter(store, options.rendezvous_timeout);
    context->connectFullMesh(adapter, device);
    context->setTimeout(timeout_);
    context_ = context;
  } catch (const Error& e) {
    throw Error(e.kind(),
                "rank " + std::to_string(rank_) + ": gloo rendezvous failed: " + e.what());
  } catch (const std::exception& e) {
    throw Error(ClassifyGlooError(e.what()),
                "rank " + std::to_string(rank_) + ": gloo rendezvous failed: " + e.what());
  }
  CommOptions wd_options = options;
  wd_options.store = store;
  watchdog_ = std::make_shared<Watchdog>(recorder_, wd_options, [this] { Abort(); });
  worker_ = std::thread([this] { Loop(); });
  watchdog_->Start();
}

GlooCommunicator::~GlooCommunicator() {
  watchdog_->Stop();
  std::deque<Task> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    dropped.swap(queue_);  // never started: fail them rather than run them on the way out
  }
  queue_cv_.notify_all();
  for (Task& t : dropped) {
    for (int64_t s : t.seqs) recorder_.Fail(s, "communicator destroyed");
    t.work->MarkFailed(ErrorKind::kInternal,
                       Describe(t.op, t.seqs.front()) + ": communicator destroyed");
  }
  worker_.join();
}

std::string GlooCommunicator::Describe(const std::string& op, int64_t seq) const {
  return "rank " + std::to_string(rank_) + ": gloo " + op + " seq " + std::to_string(seq);
}

uint32_t GlooCommunicator::NextTag() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_tag_++;
}

void GlooCommunicator::CheckPeer(int peer, const char* op) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    throw Error(ErrorKind::kInvalidArgument, "rank " + std::to_string(rank_) + ": " + op +
                                                 " with invalid peer " + std::to_string(peer));
  }
}

void GlooCommunicator::CheckHost(const Buffer& buf, const char* op) const {
  if (buf.device != DeviceType::kCpu) {
    throw Error(ErrorKind::kInvalidArgument,
                "rank " + std::to_string(rank_) + ": gloo " + op + " needs host memory");
  }
  if (buf.ptr == nullptr && buf.count > 0) {
    throw Error(ErrorKind::kInvalidArgument,
                "rank " + std::to_string(rank_) + ": gloo " + op + " on a null buffer");
  }
}

std::shared_ptr<Work> GlooCommunicator::Enqueue(std::vector<int64_t> seqs, const std::string& op,
                                                std::function<void()> run) {
  std::weak_ptr<Watchdog> weak_watchdog = watchdog_;
  auto work = std::make_shared<AsyncWork>(
      rank_, seqs.front(), op, [weak_watchdog](int64_t seq, const std::string& name) {
        if (auto wd = weak_watchdog.lock()) return wd->Fire(seq, name).message;
        return name + " seq " + std::to_string(seq) + " timed out";
      });
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_) {
      queue_.push_back(Task{std::move(seqs), op, std::move(run), work});
      queue_cv_.notify_one();
      return work;
    }
  }
  for (int64_t s : seqs) recorder_.Fail(s, "communicator aborted");
  work->MarkFailed(watchdog_->fired() ? ErrorKind::kTimeout : ErrorKind::kInternal,
                   Describe(op, seqs.front()) + ": communicator aborted");
  return work;
}

void GlooCommunicator::Loop() {
  while (true) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      queue_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    for (int64_t s : task.seqs) recorder_.Start(s);
    try {
      task.run();
      for (int64_t s : task.seqs) recorder_.Complete(s);
      task.work->MarkCompleted();
    } catch (const std::exception& e) {
      ErrorKind kind = watchdog_->fired() ? ErrorKind::kTimeout : ClassifyGlooError(e.what());
      if (const auto* err = dynamic_cast<const Error*>(&e)) kind = err->kind();
      std::string message = Describe(task.op, task.seqs.front()) + " failed: " + e.what();
      if (kind == ErrorKind::kTimeout) {
        // gloo's own deadline (the same collective timeout) can beat the watchdog's tick; either
        // way the hang gets one report, with the op still shown as started in the dump.
        message = watchdog_->Fire(task.seqs.front(), task.op).message;
      } else if (kind == ErrorKind::kPeerGone) {
        // A gloo rank that times out closes all its connections, so the other ranks of a hung
        // collective mostly see "connection closed". Look for missing ranks all the same: if
        // some never joined, this is the hang, not a crash.
        TimeoutReport report = watchdog_->Fire(task.seqs.front(), task.op, e.what());
        message = report.message;
        if (report.is_hang()) kind = ErrorKind::kTimeout;
      }
      for (int64_t s : task.seqs) recorder_.Fail(s, e.what());
      task.work->MarkFailed(kind, message);
    }
  }
}

void GlooCommunicator::Abort() {
  std::deque<Task> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    dropped.swap(queue_);
  }
  // The op in progress cannot be interrupted inside gloo; it ends at its own timeout, which is the
  // collective timeout. Queued ops fail now.
  ErrorKind kind = watchdog_->fired() ? ErrorKind::kTimeout : ErrorKind::kInternal;
  for (Task& t : dropped) {
    for (int64_t s : t.seqs) recorder_.Fail(s, "communicator aborted");
    t.work->MarkFailed(kind, Describe(t.op, t.seqs.front()) + ": communicator aborted");
  }
}

void GlooCommunicator::RunAllReduce(Buffer buf, ReduceOp op, uint32_t tag) {
  if (buf.count == 0) return;
  ReduceFn fn = GetReduceFn(buf.dtype, op);
  if (size_ > 1 && size_ <= kDirectAllreduceMaxRanks &&
      buf.bytes() * (size_ - 1) <= DirectAllreduceMaxBytes()) {
    RunDirectAllReduce(buf, fn, tag);
    if (op == ReduceOp::kAvg) DivideInPlace(buf.ptr, buf.count, buf.dtype, size_);
    return;
  }
  switch (DataTypeSize(buf.dtype)) {
    case 1:
      GlooAllreduce<uint8_t>(context_, buf.ptr, buf.count, fn, tag, timeout_);
      break;
    case 2:
      GlooAllreduce<uint16_t>(context_, buf.ptr, buf.count, fn, tag, timeout_);
      break;
    case 4:
      GlooAllreduce<uint32_t>(context_, buf.ptr, buf.count, fn, tag, timeout_);
      break;
    default:
      GlooAllreduce<uint64_t>(context_, buf.ptr, buf.count, fn, tag, timeout_);
      break;
  }
  if (op == ReduceOp::kAvg) DivideInPlace(buf.ptr, buf.count, buf.dtype, size_);
}

// Every rank sends its whole buffer to every peer and reduces the n contributions locally, in
// rank order, so that all ranks compute bit-identical results.
void GlooCommunicator::RunDirectAllReduce(Buffer buf, ReduceFn fn, uint32_t tag) {
  const size_t bytes = buf.bytes();
  std::vector<char> incoming(bytes * size_);
  auto send_buf = context_->createUnboundBuffer(buf.ptr, bytes);
  auto recv_buf = context_->createUnboundBuffer(incoming.data(), incoming.size());
  const uint64_t slot = gloo::Slot::build(kSmallAllreduceSlotPrefix, tag);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    recv_buf->recv(p, slot, p * bytes, bytes);
  }
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    send_buf->send(p, slot);
  }
  for (int p = 0; p < size_ - 1; ++p) recv_buf->waitRecv(nullptr, timeout_);
  for (int p = 0; p < size_ - 1; ++p) send_buf->waitSend(nullptr, timeout_);
  std::memcpy(incoming.data() + rank_ * bytes, buf.ptr, bytes);
  std::memcpy(buf.ptr, incoming.data(), bytes);
  for (int p = 1; p < size_; ++p) fn(buf.ptr, buf.ptr, incoming.data() + p * bytes, buf.count);
}

// Ring reduce-scatter over gloo's unbound buffers (gloo 0.5 has no options-style reduce_scatter).
// Step k sends block (r-k-1) to the right and reduces block (r-k-2) from the left, so after n-1
// steps block r holds everyone's contribution: (n-1)/n of the data crosses each link, the
// bandwidth-optimal amount nccl-tests' busbw factor assumes.
void GlooCommunicator::RunReduceScatter(Buffer in, Buffer out, ReduceOp op, uint32_t tag) {
  const size_t block_bytes = out.bytes();
  if (block_bytes == 0) return;
  if (size_ == 1) {
    std::memcpy(out.ptr, in.ptr, block_bytes);
    return;
  }
  ReduceFn fn = GetReduceFn(in.dtype, op);
  std::vector<char> scratch(static_cast<char*>(in.ptr), static_cast<char*>(in.ptr) + in.bytes());
  std::vector<char> incoming(block_bytes);
  auto send_buf = context_->createUnboundBuffer(scratch.data(), scratch.size());
  auto recv_buf = context_->createUnboundBuffer(incoming.data(), incoming.size());
  const int right = (rank_ + 1) % size_;
  const int left = (rank_ + size_ - 1) % size_;
  auto mod = [&](int v) { return ((v % size_) + size_) % size_; };
  for (int k = 0; k < size_ - 1; ++k) {
    uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, tag) + static_cast<uint8_t>(k);
    size_t send_block = mod(rank_ - k - 1);
    size_t recv_block = mod(rank_ - k - 2);
    recv_buf->recv(left, slot, 0, block_bytes);
    send_buf->send(right, slot, send_block * block_bytes, block_bytes);
    recv_buf->waitRecv(nullptr, timeout_);
    send_buf->waitSend(nullptr, timeout_);
    char* acc = scratch.data() + recv_block * block_bytes;
    fn(acc, acc, incoming.data(), out.count);
  }
  std::memcpy(out.ptr, scratch.data() + rank_ * block_bytes, block_bytes);
  if (op == ReduceOp::kAvg) DivideInPlace(out.ptr, out.count, out.dtype, size_);
}

void GlooCommunicator::RunSendRecv(const Buffer* send, int dst, uint64_t send_slot,
                                   const Buffer* recv, int src, uint64_t recv_slot) {
  std::unique_ptr<gloo::transport::UnboundBuffer> sbuf, rbuf;
  // Post the receive first so that a ring of SendRecv calls always has a matching receiver.
  if (recv && recv->bytes() > 0) {
    rbuf = context_->createUnboundBuffer(recv->ptr, recv->bytes());
    rbuf->recv(src, recv_slot);
  }
  if (send && send->bytes() > 0) {
    sbuf = context_->createUnboundBuffer(send->ptr, send->bytes());
    sbuf->send(dst, send_slot);
  }
  if (rbuf) rbuf->waitRecv(nullptr, timeout_);
  if (sbuf) sbuf->waitSend(nullptr, timeout_);
}

std::shared_ptr<Work> GlooCommunicator::AllReduce(Buffer buf, ReduceOp op) {
  CheckHost(buf, "allreduce");
  int64_t seq = recorder_.Record("allreduce", buf.dtype, buf.count, buf.bytes());
  return Enqueue({seq}, "allreduce",
                 [this, buf, op, tag = NextTag()] { RunAllReduce(buf, op, tag); });
}

std::shared_ptr<Work> GlooCommunicator::Broadcast(Buffer buf, int root) {
  CheckHost(buf, "broadcast");
  if (root < 0 || root >= size_) {
    throw Error(ErrorKind::kInvalidArgument, "broadcast with invalid root " + std::to_string(root));
  }
  int64_t seq = recorder_.Record("broadcast", buf.dtype, buf.count, buf.bytes(), -1, root);
  return Enqueue({seq}, "broadcast", [this, buf, root, tag = NextTag()] {
    if (buf.bytes() == 0 || size_ == 1) return;
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(buf.ptr), buf.bytes());
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::broadcast(opts);
  });
}

std::shared_ptr<Work> GlooCommunicator::AllGather(Buffer in, Buffer out) {
  CheckHost(in, "allgather");
  CheckHost(out, "allgather");
  if (out.count != in.count * size_ || out.dtype != in.dtype) {
    throw Error(ErrorKind::kInvalidArgument, "allgather output must hold size() * input elements");
  }
  int64_t seq = recorder_.Record("allgather", in.dtype, in.count, out.bytes());
  return Enqueue({seq}, "allgather", [this, in, out, tag = NextTag()] {
    if (in.bytes() == 0) return;
    if (size_ == 1) {
      std::memmove(out.ptr, in.ptr, in.bytes());
      return;
    }
    gloo::AllgatherOptions opts(context_);
    opts.setInput(static_cast<uint8_t*>(in.ptr), in.bytes());
    opts.setOutput(static_cast<uint8_t*>(out.ptr), out.bytes());
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::allgather(opts);
  });
}

std::shared_ptr<Work> GlooCommunicator::ReduceScatter(Buffer in, Buffer out, ReduceOp op) {
  CheckHost(in, "reduce_scatter");
  CheckHost(out, "reduce_scatter");
  if (in.count != out.count * size_ || out.dtype != in.dtype) {
    throw Error(ErrorKind::kInvalidArgument,
                "reduce_scatter input must hold size() * output elements");
  }
  int64_t seq = recorder_.Record("reduce_scatter", in.dtype, out.count, in.bytes());
  return Enqueue({seq}, "reduce_scatter",
                 [this, in, out, op, tag = NextTag()] { RunReduceScatter(in, out, op, tag); });
}

std::shared_ptr<Work> GlooCommunicator::AllToAll(Buffer in, Buffer out) {
  CheckHost(in, "alltoall");
  CheckHost(out, "alltoall");
  if (in.count != out.count || in.count % size_ != 0 || out.dtype != in.dtype) {
    throw Error(ErrorKind::kInvalidArgument,
                "alltoall buffers must be equal and hold a multiple of size() elements");
  }
  int64_t seq = recorder_.Record("alltoall", in.dtype, in.count, in.bytes());
  return Enqueue({seq}, "alltoall", [this, in, out, tag = NextTag()] {
    if (in.bytes() == 0) return;
    if (size_ == 1) {
      std::memmove(out.ptr, in.ptr, in.bytes());
      return;
    }
    gloo::AlltoallOptions opts(context_);
    opts.setInput(static_cast<uint8_t*>(in.ptr), in.bytes());
    opts.setOutput(static_cast<uint8_t*>(out.ptr), out.bytes());
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::alltoall(opts);
  });
}

std::shared_ptr<Work> GlooCommunicator::Send(Buffer buf, int peer) {
  CheckHost(buf, "send");
  CheckPeer(peer, "send");
  int64_t seq = recorder_.Record("send", buf.dtype, buf.count, buf.bytes(), peer);
  uint64_t slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    slot = gloo::Slot::build(kP2PSlotPrefix, sends_to_[peer]++);
  }
  return Enqueue({seq}, "send",
                 [this, buf, peer, slot] { RunSendRecv(&buf, peer, slot, nullptr, -1, 0); });
}

std::shared_ptr<Work> GlooCommunicator::Recv(Buffer buf, int peer) {
  CheckHost(buf, "recv");
  CheckPeer(peer, "recv");
  int64_t seq = recorder_.Record("recv", buf.dtype, buf.count, buf.bytes(), peer);
  uint64_t slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    slot = gloo::Slot::build(kP2PSlotPrefix, recvs_from_[peer]++);
  }
  return Enqueue({seq}, "recv",
                 [this, buf, peer, slot] { RunSendRecv(nullptr, -1, 0, &buf, peer, slot); });
}

std::shared_ptr<Work> GlooCommunicator::SendRecv(Buffer send, int dst, Buffer recv, int src) {
  CheckHost(send, "send");
  CheckHost(recv, "recv");
  CheckPeer(dst, "send");
  CheckPeer(src, "recv");
  int64_t send_seq = recorder_.Record("send", send.dtype, send.count, send.bytes(), dst);
  int64_t recv_seq = recorder_.Record("recv", recv.dtype, recv.count, recv.bytes(), src);
  uint64_t send_slot, recv_slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    send_slot = gloo::Slot::build(kP2PSlotPrefix, sends_to_[dst]++);
    recv_slot = gloo::Slot::build(kP2PSlotPrefix, recvs_from_[src]++);
  }
  return Enqueue({send_seq, recv_seq}, "sendrecv",
                 [this, send, dst, send_slot, recv, src, recv_slot] {
                   RunSendRecv(&send, dst, send_slot, &recv, src, recv_slot);
                 });
}

std::shared_ptr<Work> GlooCommunicator::Barrier() {
  int64_t seq = recorder_.Record("barrier", DataType::kUint8, 0, 0);
  return Enqueue({seq}, "barrier", [this, tag = NextTag()] {
    if (size_ == 1) return;
    gloo::BarrierOptions opts(context_);
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::barrier(opts);
  });
}

}  // namespace dlaunch::core
