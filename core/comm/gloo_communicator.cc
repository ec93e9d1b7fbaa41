#include "core/comm/gloo_communicator.h"

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "core/base/proc.h"
#include "core/comm/gloo_ops.h"
#include "core/comm/gloo_store_adapter.h"
#include "core/comm/shm_group.h"
#include "core/error.h"

namespace dlaunch::core {
namespace {

// How long after a caller ran ops itself the worker leaves queued ops to callers. A caller that
// waits op by op (or for a batch in order) comes back well within it and runs the next op on its
// own thread; only past it does the worker take over, so ops still progress, at most this late,
// when nobody waits.
constexpr std::chrono::microseconds kCallerGrace(200);

// Slot prefix of point-to-point traffic; gloo's own algorithms use small values and gloo_ops
// 0x71 and 0x73.
constexpr uint8_t kP2PSlotPrefix = 0x72;

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

}  // namespace

GlooCommunicator::GlooCommunicator(const CommOptions& options)
    : rank_(options.rank),
      size_(options.size),
      timeout_(options.timeout),
      check_("gloo", options.rank, options.size, DeviceType::kCpu),
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
    SetUpTransport(options, store, device);
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
  watchdog_->DumpAtExit();
}

std::string GlooCommunicator::Describe(const std::string& op, int64_t seq) const {
  return "rank " + std::to_string(rank_) + ": gloo " + op + " seq " + std::to_string(seq);
}

uint32_t GlooCommunicator::NextTag() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_tag_++;
}

std::shared_ptr<Work> GlooCommunicator::Enqueue(std::vector<int64_t> seqs, const std::string& op,
                                                std::function<void()> run) {
  std::weak_ptr<Watchdog> weak_watchdog = watchdog_;
  auto work = std::make_shared<AsyncWork>(
      rank_, seqs.front(), op, [weak_watchdog](int64_t seq, const std::string& name) {
        if (auto wd = weak_watchdog.lock()) return wd->Fire(seq, name).message;
        return name + " seq " + std::to_string(seq) + " timed out";
      });
  work->SetRunHere([this](AsyncWork& w, std::chrono::milliseconds timeout) {
    // Only a wait that lasts as long as the op may run it: a shorter one must be able to give up.
    if (timeout >= timeout_) RunHere(w, std::chrono::steady_clock::now() + timeout);
  });
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_) {
      queue_.push_back(Task{std::move(seqs), op, std::move(run), work});
      // A worker that polls wakes up by itself within the grace: not waking it spares a thread
      // hand-off per op to a caller that runs its ops itself.
      if (!worker_polls_) queue_cv_.notify_one();
      return work;
    }
  }
  for (int64_t s : seqs) recorder_.Fail(s, "communicator aborted");
  work->MarkFailed(watchdog_->fired() ? ErrorKind::kTimeout : ErrorKind::kInternal,
                   Describe(op, seqs.front()) + ": communicator aborted");
  return work;
}

void GlooCommunicator::Loop() {
  // Ops on shared memory run on this thread, so this is the thread whose death peers must see.
  struct Attached {
    ShmGroup* shm;
    explicit Attached(ShmGroup* s) : shm(s) {
      if (shm) shm->Attach();
    }
    ~Attached() {
      if (shm) shm->Detach();
    }
  } attached(shm_.get());
  while (true) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (true) {
        if (stop_ && queue_.empty()) return;  // stopped and drained
        const auto now = std::chrono::steady_clock::now();
        // Callers that wait run their ops themselves (RunHere): with ranks outnumbering cores,
        // handing each op to this thread and its completion back costs two wake-ups per op, more
        // than a small shared-memory op itself. So the worker stands aside while callers wait or
        // have just run ops, and takes the queue's head only when nobody came for it.
        const bool callers_active = callers_ > 0 || now < caller_ran_ + kCallerGrace;
        if (!busy_ && !queue_.empty() && (!callers_active || stop_)) break;
        worker_polls_ = !queue_.empty() || now < caller_ran_ + kCallerGrace;
        if (worker_polls_) {
          queue_cv_.wait_for(lock, kCallerGrace);
        } else {
          queue_cv_.wait(lock);
        }
        worker_polls_ = false;
      }
      TakeHead(&task);
    }
    RunTask(task);
    Release();
  }
}

void GlooCommunicator::TakeHead(Task* task) {
  *task = std::move(queue_.front());
  queue_.pop_front();
  busy_ = true;
}

void GlooCommunicator::Release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
  }
  queue_cv_.notify_one();  // what was queued behind the op is the worker's again
  callers_cv_.notify_all();
}

bool GlooCommunicator::Queued(const AsyncWork& work) const {
  for (const Task& t : queue_) {
    if (t.work.get() == &work) return true;
  }
  return false;
}

void GlooCommunicator::RunHere(AsyncWork& work, std::chrono::steady_clock::time_point deadline) {
  // The caller runs the ops ahead of its own and its own on its thread, sparing two thread
  // hand-offs per op (worker wake-up, completion wake-up) that dominate a small shared-memory op
  // when ranks outnumber cores. An op already running (on the worker) is waited for first.
  std::unique_lock<std::mutex> lock(mu_);
  ++callers_;
  const bool free = callers_cv_.wait_until(
      lock, deadline, [&] { return !busy_ || !Queued(work) || stop_ || aborted_; });
  if (!free || stop_ || aborted_ || !Queued(work)) {
    --callers_;
    return;  // done, failed, or still behind a running op: the caller waits as usual
  }
  while (true) {
    Task task;
    TakeHead(&task);
    lock.unlock();
    RunTask(task);
    lock.lock();
    busy_ = false;
    if (task.work.get() == &work || queue_.empty() || aborted_) break;
  }
  --callers_;
  caller_ran_ = std::chrono::steady_clock::now();
  lock.unlock();
  callers_cv_.notify_all();  // other callers waiting for the queue
}

void GlooCommunicator::RunTask(Task& task) {
  for (int64_t s : task.seqs) recorder_.Start(s);
  try {
    task.run();
    for (int64_t s : task.seqs) recorder_.Complete(s);
    task.work->MarkCompleted();
  } catch (const std::exception& e) {
    ErrorKind kind = ClassifyGlooError(e.what());
    if (const auto* err = dynamic_cast<const Error*>(&e)) kind = err->kind();
    std::string message = Describe(task.op, task.seqs.front()) + " failed: " + e.what();
    if (watchdog_->fired() || kind == ErrorKind::kTimeout) {
      // Either the watchdog's abort ended this op, possibly while it is still firing, or gloo's
      // own deadline (the same collective timeout) beat the watchdog's tick. Either way the op
      // fails with the one report, with the op still shown as started in the dump. Fire returns
      // it only once the first firing, callbacks included, is done, so a caller woken by this
      // failure finds what the timeout callback recorded.
      TimeoutReport report = watchdog_->Fire(task.seqs.front(), task.op);
      message = report.message;
      if (report.is_hang()) kind = ErrorKind::kTimeout;
    } else if (kind == ErrorKind::kPeerGone) {
      // A gloo rank that times out closes all its connections, so the other ranks of a hung
      // collective mostly see "connection closed". Look for missing ranks all the same: if
      // some never joined, this is the hang, not a crash.
      TimeoutReport report = watchdog_->Fire(task.seqs.front(), task.op, e.what());
      message = report.message;
      if (report.is_hang()) kind = ErrorKind::kTimeout;
    } else if (kind == ErrorKind::kInvalidArgument) {
      // The ranks called different collectives (the shared-memory shape check): abort and dump
      // like a broken peer, so that every rank's flight recorder shows the mismatch.
      message = watchdog_->Fire(task.seqs.front(), task.op, e.what()).message;
    }
    for (int64_t s : task.seqs) recorder_.Fail(s, e.what());
    task.work->MarkFailed(kind, message);
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
  callers_cv_.notify_all();  // callers waiting to run the dropped ops give up
  // Shared-memory waits, unlike gloo's, can be interrupted: the op in progress fails now.
  if (shm_) shm_->Abort();
}

void GlooCommunicator::RunSendRecv(const Buffer* send, int dst, uint64_t send_slot,
                                   const Buffer* recv, int src, uint64_t recv_slot) {
  // Peers on this host go through shared memory, the others through gloo; gloo's halves are
  // posted first so that they progress while the shared-memory ones run.
  const bool shm_send = send && SharesHost(dst);
  const bool shm_recv = recv && SharesHost(src);
  std::unique_ptr<gloo::transport::UnboundBuffer> sbuf, rbuf;
  // Post the receive first so that a ring of SendRecv calls always has a matching receiver.
  if (recv && !shm_recv && recv->bytes() > 0) {
    rbuf = context_->createUnboundBuffer(recv->ptr, recv->bytes());
    rbuf->recv(src, recv_slot);
  }
  if (send && !shm_send && send->bytes() > 0) {
    sbuf = context_->createUnboundBuffer(send->ptr, send->bytes());
    sbuf->send(dst, send_slot);
  }
  if (shm_send || shm_recv)
    RunShmSendRecv(shm_send ? send : nullptr, dst, shm_recv ? recv : nullptr, src);
  if (rbuf) rbuf->waitRecv(nullptr, timeout_);
  if (sbuf) sbuf->waitSend(nullptr, timeout_);
}

std::shared_ptr<Work> GlooCommunicator::AllReduce(Buffer buf, ReduceOp op) {
  check_.Buffer("allreduce", buf);
  int64_t seq = recorder_.Record("allreduce", buf.dtype, buf.count, buf.bytes());
  return Enqueue({seq}, "allreduce", [this, buf, op, tag = NextTag()] {
    if (hierarchical_) return RunHierAllReduce(buf, op, tag);
    gloo_ops::AllReduce(context_, buf, op, tag, timeout_);
  });
}

std::shared_ptr<Work> GlooCommunicator::Broadcast(Buffer buf, int root) {
  check_.Buffer("broadcast", buf);
  check_.Root("broadcast", root);
  int64_t seq = recorder_.Record("broadcast", buf.dtype, buf.count, buf.bytes(), -1, root);
  return Enqueue({seq}, "broadcast", [this, buf, root, tag = NextTag()] {
    if (hierarchical_) return RunHierBroadcast(buf, root, tag);
    gloo_ops::Broadcast(context_, buf.ptr, buf.bytes(), root, tag, timeout_);
  });
}

std::shared_ptr<Work> GlooCommunicator::AllGather(Buffer in, Buffer out) {
  check_.AllGather(in, out);
  int64_t seq = recorder_.Record("allgather", in.dtype, in.count, out.bytes());
  return Enqueue({seq}, "allgather", [this, in, out, tag = NextTag()] {
    if (hierarchical_) return RunHierAllGather(in, out, tag);
    gloo_ops::AllGather(context_, in.ptr, in.bytes(), out.ptr, tag, timeout_);
  });
}

std::shared_ptr<Work> GlooCommunicator::ReduceScatter(Buffer in, Buffer out, ReduceOp op) {
  check_.ReduceScatter(in, out);
  int64_t seq = recorder_.Record("reduce_scatter", in.dtype, out.count, in.bytes());
  return Enqueue({seq}, "reduce_scatter", [this, in, out, op, tag = NextTag()] {
    if (hierarchical_) return RunHierReduceScatter(in, out, op, tag);
    gloo_ops::ReduceScatter(context_, in, out, op, tag, timeout_);
  });
}

std::shared_ptr<Work> GlooCommunicator::AllToAll(Buffer in, Buffer out) {
  check_.AllToAll(in, out);
  int64_t seq = recorder_.Record("alltoall", in.dtype, in.count, in.bytes());
  return Enqueue({seq}, "alltoall", [this, in, out, tag = NextTag()] {
    gloo_ops::AllToAll(context_, in, out, tag, timeout_);
  });
}

std::shared_ptr<Work> GlooCommunicator::Send(Buffer buf, int peer) {
  check_.Buffer("send", buf);
  check_.Peer("send", peer);
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
  check_.Buffer("recv", buf);
  check_.Peer("recv", peer);
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
  check_.Buffer("send", send);
  check_.Buffer("recv", recv);
  check_.Peer("send", dst);
  check_.Peer("recv", src);
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
    if (hierarchical_) return RunHierBarrier(tag);
    gloo_ops::Barrier(context_, tag, timeout_);
  });
}

}  // namespace dlaunch::core
