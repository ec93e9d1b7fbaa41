#include "core/comm/nccl_communicator.h"

#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/comm/nccl_check.h"
#include "core/comm/nccl_plan.h"
#include "core/error.h"

namespace dlaunch::core {

ncclResult_t CheckNccl(ncclResult_t res, void* comm, const char* call, const char* file, int line) {
  if (res == ncclSuccess || res == ncclInProgress) return res;
  std::string message = std::string(file) + ":" + std::to_string(line) + ": " + call +
                        " failed: " + ncclGetErrorString(res);
  if (comm != nullptr) {
    const char* last = ncclGetLastError(static_cast<ncclComm_t>(comm));
    if (last && *last) message += std::string(" (") + last + ")";
  }
  ErrorKind kind = res == ncclRemoteError || res == ncclSystemError ? ErrorKind::kPeerGone
                                                                    : ErrorKind::kInternal;
  throw Error(kind, message);
}

void CheckCuda(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return;
  ErrorKind kind =
      err == cudaErrorMemoryAllocation ? ErrorKind::kOutOfMemory : ErrorKind::kInternal;
  throw Error(kind, std::string(file) + ":" + std::to_string(line) + ": " + call +
                        " failed: " + cudaGetErrorString(err));
}

namespace {

ncclDataType_t NcclType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      return ncclBfloat16;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kUint8:
      return ncclUint8;
    case DataType::kInt8:
      return ncclInt8;
  }
  return ncclUint8;
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kProd:
      return ncclProd;
  }
  return ncclSum;
}

int PickDevice(const CommOptions& options) {
  int count = CudaDeviceCount();
  if (count == 0) throw UsageError("nccl backend: no CUDA device is visible");
  if (options.device_index >= 0) return options.device_index % count;
  const char* local = std::getenv("LOCAL_RANK");
  int local_rank = local ? std::atoi(local) : options.rank;
  return local_rank % count;
}

}  // namespace

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

NcclCommunicator::NcclCommunicator(const CommOptions& options)
    : rank_(options.rank),
      size_(options.size),
      timeout_(options.timeout),
      check_("nccl", options.rank, options.size, DeviceType::kCuda),
      recorder_(options.rank, options.size, "nccl", options.flight_recorder_capacity) {
  if (size_ < 1 || rank_ < 0 || rank_ >= size_) {
    throw UsageError("invalid rank " + std::to_string(rank_) + " for world size " +
                     std::to_string(size_));
  }
  std::shared_ptr<Store> store = options.store ? options.store : MakeMemoryStore();
  device_ = PickDevice(options);
  DLAUNCH_CUDA_CHECK(cudaSetDevice(device_));

  ncclUniqueId id;
  const std::string key = "nccl/unique_id";
  if (rank_ == 0) {
    DLAUNCH_NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
    store->Set(key, std::string(reinterpret_cast<const char*>(&id), sizeof(id)));
  } else {
    std::string value = store->Get(key, options.rendezvous_timeout);
    if (value.size() != sizeof(id)) {
      throw Error(ErrorKind::kInternal,
                  "rank " + std::to_string(rank_) + ": malformed ncclUniqueId in the store");
    }
    std::memcpy(&id, value.data(), sizeof(id));
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  DLAUNCH_NCCL_CHECK(ncclCommInitRankConfig(&comm, size_, id, rank_, &config), nullptr);
  comm_ = comm;
  // Init runs in the background on a non-blocking communicator; bound it ourselves.
  auto deadline = std::chrono::steady_clock::now() + options.rendezvous_timeout;
  while (true) {
    ncclResult_t state = ncclInProgress;
    DLAUNCH_NCCL_CHECK(ncclCommGetAsyncError(comm, &state), comm_);
    if (state == ncclSuccess) break;
    if (state != ncclInProgress) {
      ncclCommAbort(comm);
      comm_ = nullptr;
      DLAUNCH_NCCL_CHECK(state, nullptr);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ncclCommAbort(comm);
      comm_ = nullptr;
      throw Error(ErrorKind::kTimeout, "rank " + std::to_string(rank_) +
                                           ": NCCL communicator init timed out after " +
                                           std::to_string(options.rendezvous_timeout.count()) +
                                           " ms (are all ranks up?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  cudaStream_t stream = nullptr;
  DLAUNCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_ = stream;
  barrier_buf_ = Allocate(sizeof(int32_t));

  CommOptions wd_options = options;
  wd_options.store = store;
  watchdog_ = std::make_shared<Watchdog>(
      recorder_, wd_options, [this] { Abort(); }, [this] { Poll(); });
  poll_target_->self = this;
  watchdog_->Start();
}

NcclCommunicator::~NcclCommunicator() {
  {
    std::lock_guard<std::mutex> lock(poll_target_->mu);
    poll_target_->self = nullptr;
  }
  if (watchdog_) watchdog_->Stop();
  if (!aborted_ && comm_ != nullptr) {
    // Flush outstanding work, bounded: a finalize that hangs is a hang like any other.
    bool clean = false;
    ncclResult_t res = ncclCommFinalize(AsComm(comm_));
    if (res == ncclSuccess || res == ncclInProgress) {
      auto deadline = std::chrono::steady_clock::now() + timeout_;
      while (std::chrono::steady_clock::now() < deadline) {
        ncclResult_t state = ncclInProgress;
        if (ncclCommGetAsyncError(AsComm(comm_), &state) != ncclSuccess) break;
        if (state == ncclSuccess) {
          clean = true;
          break;
        }
        if (state != ncclInProgress) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    if (clean) {
      ncclCommDestroy(AsComm(comm_));
    } else {
      ncclCommAbort(AsComm(comm_));
    }
  }
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    for (Pending& p : pending_) cudaEventDestroy(static_cast<cudaEvent_t>(p.event));
    pending_.clear();
  }
  barrier_buf_.reset();
  if (stream_) cudaStreamDestroy(AsStream(stream_));
  if (watchdog_) watchdog_->DumpAtExit();
}

void NcclCommunicator::AwaitEnqueued(const std::string& what) {
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (true) {
    if (aborted_) throw Error(ErrorKind::kTimeout, what + ": communicator aborted");
    ncclResult_t state = ncclInProgress;
    DLAUNCH_NCCL_CHECK(ncclCommGetAsyncError(AsComm(comm_), &state), comm_);
    if (state == ncclSuccess) return;
    DLAUNCH_NCCL_CHECK(state, comm_);
    if (std::chrono::steady_clock::now() > deadline) {
      throw Error(ErrorKind::kTimeout, what + ": enqueue did not finish within " +
                                           std::to_string(timeout_.count()) + " ms");
    }
    std::this_thread::yield();
  }
}

std::shared_ptr<Work> NcclCommunicator::Launch(std::vector<int64_t> seqs, const std::string& op,
                                               const std::function<int()>& issue) {
  std::weak_ptr<Watchdog> weak_watchdog = watchdog_;
  auto work = std::make_shared<AsyncWork>(
      rank_, seqs.front(), op,
      [weak_watchdog](int64_t seq, const std::string& name) {
        if (auto wd = weak_watchdog.lock()) return wd->Fire(seq, name).message;
        return name + " seq " + std::to_string(seq) + " timed out";
      },
      [target = poll_target_] {
        std::lock_guard<std::mutex> lock(target->mu);
        if (target->self) target->self->Poll();
      });
  const std::string what =
      "rank " + std::to_string(rank_) + ": nccl " + op + " seq " + std::to_string(seqs.front());
  std::lock_guard<std::mutex> lock(launch_mu_);
  try {
    if (aborted_) throw Error(ErrorKind::kTimeout, what + ": communicator aborted");
    DLAUNCH_CUDA_CHECK(cudaSetDevice(device_));
    for (int64_t s : seqs) recorder_.Start(s);
    ncclResult_t res = static_cast<ncclResult_t>(issue());
    if (res == ncclInProgress) AwaitEnqueued(what);
    if (capturing_) {
      // Recorded into the graph, not run: the graph's launch is the op that gets tracked.
      ++captured_ops_;
      for (int64_t s : seqs) recorder_.Complete(s);
      work->MarkCompleted();
      return work;
    }
    cudaEvent_t event = nullptr;
    DLAUNCH_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    DLAUNCH_CUDA_CHECK(cudaEventRecord(event, AsStream(stream_)));
    std::lock_guard<std::mutex> plock(pending_mu_);
    pending_.push_back(Pending{std::move(seqs), event, work});
  } catch (const Error& e) {
    if (capturing_ && capture_error_.empty()) capture_error_ = what + ": " + e.what();
    for (int64_t s : seqs) recorder_.Fail(s, e.what());
    work->MarkFailed(watchdog_->fired() ? ErrorKind::kTimeout : e.kind(),
                     what + " failed: " + e.what());
  }
  return work;
}

void NcclCommunicator::Poll() {
  if (aborted_) return;
  std::lock_guard<std::mutex> lock(pending_mu_);
  if (pending_.empty()) return;
  cudaSetDevice(device_);  // the watchdog thread and callers of Wait() may be on another device
  while (!pending_.empty()) {
    Pending& p = pending_.front();
    cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(p.event));
    if (err == cudaErrorNotReady) break;  // one stream: later work is not done either
    if (err == cudaSuccess) {
      for (int64_t s : p.seqs) recorder_.Complete(s);
      p.work->MarkCompleted();
    } else {
      std::string msg = std::string("CUDA error: ") + cudaGetErrorString(err);
      for (int64_t s : p.seqs) recorder_.Fail(s, msg);
      p.work->MarkFailed(ErrorKind::kInternal, msg);
    }
    cudaEventDestroy(static_cast<cudaEvent_t>(p.event));
    pending_.pop_front();
  }
  if (pending_.empty()) return;
  ncclResult_t state = ncclSuccess;
  if (ncclCommGetAsyncError(AsComm(comm_), &state) == ncclSuccess && state != ncclSuccess &&
      state != ncclInProgress) {
    std::string msg = std::string("NCCL async error: ") + ncclGetErrorString(state);
    const char* last = ncclGetLastError(AsComm(comm_));
    if (last && *last) msg += std::string(" (") + last + ")";
    for (Pending& p : pending_) {
      for (int64_t s : p.seqs) recorder_.Fail(s, msg);
      p.work->MarkFailed(ErrorKind::kPeerGone, msg);
      cudaEventDestroy(static_cast<cudaEvent_t>(p.event));
    }
    pending_.clear();
    aborted_ = true;
    ncclCommAbort(AsComm(comm_));
  }
}

void NcclCommunicator::FailAll(ErrorKind kind, const std::string& message) {
  std::lock_guard<std::mutex> lock(pending_mu_);
  for (Pending& p : pending_) {
    for (int64_t s : p.seqs) recorder_.Fail(s, message);
    p.work->MarkFailed(kind, message);
    cudaEventDestroy(static_cast<cudaEvent_t>(p.event));
  }
  pending_.clear();
}

void NcclCommunicator::Abort() {
  if (aborted_.exchange(true)) return;
  // ncclCommAbort is the one NCCL call meant to be made while another thread is stuck inside
  // the communicator; it makes the hung kernels return.
  if (comm_ != nullptr) ncclCommAbort(AsComm(comm_));
  FailAll(watchdog_ && watchdog_->fired() ? ErrorKind::kTimeout : ErrorKind::kInternal,
          "rank " + std::to_string(rank_) + ": nccl communicator aborted");
}

std::shared_ptr<Work> NcclCommunicator::AllReduce(Buffer buf, ReduceOp op) {
  check_.Buffer("allreduce", buf);
  int64_t seq = recorder_.Record("allreduce", buf.dtype, buf.count, buf.bytes());
  return Launch({seq}, "allreduce", [&] {
    return DLAUNCH_NCCL_CHECK(ncclAllReduce(buf.ptr, buf.ptr, buf.count, NcclType(buf.dtype),
                                            NcclOp(op), AsComm(comm_), AsStream(stream_)),
                              comm_);
  });
}

std::shared_ptr<Work> NcclCommunicator::Broadcast(Buffer buf, int root) {
  check_.Buffer("broadcast", buf);
  check_.Root("broadcast", root);
  int64_t seq = recorder_.Record("broadcast", buf.dtype, buf.count, buf.bytes(), -1, root);
  return Launch({seq}, "broadcast", [&] {
    return DLAUNCH_NCCL_CHECK(ncclBroadcast(buf.ptr, buf.ptr, buf.count, NcclType(buf.dtype), root,
                                            AsComm(comm_), AsStream(stream_)),
                              comm_);
  });
}

std::shared_ptr<Work> NcclCommunicator::AllGather(Buffer in, Buffer out) {
  check_.AllGather(in, out);
  int64_t seq = recorder_.Record("allgather", in.dtype, in.count, out.bytes());
  return Launch({seq}, "allgather", [&] {
    return DLAUNCH_NCCL_CHECK(ncclAllGather(in.ptr, out.ptr, in.count, NcclType(in.dtype),
                                            AsComm(comm_), AsStream(stream_)),
                              comm_);
  });
}

std::shared_ptr<Work> NcclCommunicator::ReduceScatter(Buffer in, Buffer out, ReduceOp op) {
  check_.ReduceScatter(in, out);
  int64_t seq = recorder_.Record("reduce_scatter", in.dtype, out.count, in.bytes());
  return Launch({seq}, "reduce_scatter", [&] {
    return DLAUNCH_NCCL_CHECK(ncclReduceScatter(in.ptr, out.ptr, out.count, NcclType(in.dtype),
                                                NcclOp(op), AsComm(comm_), AsStream(stream_)),
                              comm_);
  });
}

std::shared_ptr<Work> NcclCommunicator::AllToAll(Buffer in, Buffer out) {
  check_.AllToAll(in, out);
  int64_t seq = recorder_.Record("alltoall", in.dtype, in.count, in.bytes());
  return Launch({seq}, "alltoall", [&] {
    // NCCL has no alltoall: a group of sends and receives, as nccl-tests does it.
    size_t chunk = in.count / size_;
    size_t chunk_bytes = chunk * DataTypeSize(in.dtype);
    DLAUNCH_NCCL_CHECK(ncclGroupStart(), comm_);
    for (int p = 0; p < size_; ++p) {
      DLAUNCH_NCCL_CHECK(ncclSend(static_cast<char*>(in.ptr) + p * chunk_bytes, chunk,
                                  NcclType(in.dtype), p, AsComm(comm_), AsStream(stream_)),
                         comm_);
      DLAUNCH_NCCL_CHECK(ncclRecv(static_cast<char*>(out.ptr) + p * chunk_bytes, chunk,
                                  NcclType(in.dtype), p, AsComm(comm_), AsStream(stream_)),
                         comm_);
    }
    return DLAUNCH_NCCL_CHECK(ncclGroupEnd(), comm_);
  });
}

std::shared_ptr<Work> NcclCommunicator::Send(Buffer buf, int peer) {
  check_.Buffer("send", buf);
  check_.Peer("send", peer);
  int64_t seq = recorder_.Record("send", buf.dtype, buf.count, buf.bytes(), peer);
  return Launch({seq}, "send", [&] {
    return DLAUNCH_NCCL_CHECK(
        ncclSend(buf.ptr, buf.count, NcclType(buf.dtype), peer, AsComm(comm_), AsStream(stream_)),
        comm_);
  });
}

std::shared_ptr<Work> NcclCommunicator::Recv(Buffer buf, int peer) {
  check_.Buffer("recv", buf);
  check_.Peer("recv", peer);
  int64_t seq = recorder_.Record("recv", buf.dtype, buf.count, buf.bytes(), peer);
  return Launch({seq}, "recv", [&] {
    return DLAUNCH_NCCL_CHECK(
        ncclRecv(buf.ptr, buf.count, NcclType(buf.dtype), peer, AsComm(comm_), AsStream(stream_)),
        comm_);
  });
}

std::shared_ptr<Work> NcclCommunicator::SendRecv(Buffer send, int dst, Buffer recv, int src) {
  check_.Buffer("send", send);
  check_.Buffer("recv", recv);
  check_.Peer("send", dst);
  check_.Peer("recv", src);
  int64_t send_seq = recorder_.Record("send", send.dtype, send.count, send.bytes(), dst);
  int64_t recv_seq = recorder_.Record("recv", recv.dtype, recv.count, recv.bytes(), src);
  return Launch({send_seq, recv_seq}, "sendrecv", [&] {
    DLAUNCH_NCCL_CHECK(ncclGroupStart(), comm_);
    DLAUNCH_NCCL_CHECK(
        ncclSend(send.ptr, send.count, NcclType(send.dtype), dst, AsComm(comm_), AsStream(stream_)),
        comm_);
    DLAUNCH_NCCL_CHECK(
        ncclRecv(recv.ptr, recv.count, NcclType(recv.dtype), src, AsComm(comm_), AsStream(stream_)),
        comm_);
    return DLAUNCH_NCCL_CHECK(ncclGroupEnd(), comm_);
  });
}

std::shared_ptr<Work> NcclCommunicator::Barrier() {
  int64_t seq = recorder_.Record("barrier", DataType::kInt32, 1, sizeof(int32_t));
  return Launch({seq}, "barrier", [&] {
    return DLAUNCH_NCCL_CHECK(ncclAllReduce(barrier_buf_.get(), barrier_buf_.get(), 1, ncclInt32,
                                            ncclSum, AsComm(comm_), AsStream(stream_)),
                              comm_);
  });
}

std::shared_ptr<Work> NcclCommunicator::AllReduce(Buffer in, Buffer out, ReduceOp op) {
  check_.Alike("allreduce", in, out);
  int64_t seq = recorder_.Record("allreduce", in.dtype, in.count, in.bytes());
  return Launch({seq}, "allreduce", [&] {
    return DLAUNCH_NCCL_CHECK(ncclAllReduce(in.ptr, out.ptr, in.count, NcclType(in.dtype),
                                            NcclOp(op), AsComm(comm_), AsStream(stream_)),
                              comm_);
  });
}

std::shared_ptr<Work> NcclCommunicator::Broadcast(Buffer in, Buffer out, int root) {
  check_.Alike("broadcast", in, out);
  check_.Root("broadcast", root);
  int64_t seq = recorder_.Record("broadcast", out.dtype, out.count, out.bytes(), -1, root);
  return Launch({seq}, "broadcast", [&] {
    return DLAUNCH_NCCL_CHECK(ncclBroadcast(in.ptr, out.ptr, out.count, NcclType(out.dtype), root,
                                            AsComm(comm_), AsStream(stream_)),
                              comm_);
  });
}

std::shared_ptr<Work> NcclCommunicator::Reduce(Buffer in, Buffer out, ReduceOp op, int root) {
  check_.Alike("reduce", in, out);
  check_.Root("reduce", root);
  int64_t seq = recorder_.Record("reduce", in.dtype, in.count, in.bytes(), -1, root);
  return Launch({seq}, "reduce", [&] {
    return DLAUNCH_NCCL_CHECK(ncclReduce(in.ptr, out.ptr, in.count, NcclType(in.dtype), NcclOp(op),
                                         root, AsComm(comm_), AsStream(stream_)),
                              comm_);
  });
}

// NCCL has no gather or scatter: a group of sends and receives, as nccl-tests does it.
std::shared_ptr<Work> NcclCommunicator::Gather(Buffer in, Buffer out, int root) {
  check_.Gather(in, out, root);
  int64_t seq = recorder_.Record("gather", in.dtype, in.count, in.bytes() * size_, -1, root);
  return Launch({seq}, "gather", [&] {
    DLAUNCH_NCCL_CHECK(ncclGroupStart(), comm_);
    if (rank_ == root) {
      for (int p = 0; p < size_; ++p) {
        DLAUNCH_NCCL_CHECK(ncclRecv(static_cast<char*>(out.ptr) + p * in.bytes(), in.count,
                                    NcclType(in.dtype), p, AsComm(comm_), AsStream(stream_)),
                           comm_);
      }
    }
    DLAUNCH_NCCL_CHECK(
        ncclSend(in.ptr, in.count, NcclType(in.dtype), root, AsComm(comm_), AsStream(stream_)),
        comm_);
    return DLAUNCH_NCCL_CHECK(ncclGroupEnd(), comm_);
  });
}

std::shared_ptr<Work> NcclCommunicator::Scatter(Buffer in, Buffer out, int root) {
  check_.Scatter(in, out, root);
  int64_t seq = recorder_.Record("scatter", out.dtype, out.count, out.bytes() * size_, -1, root);
  return Launch({seq}, "scatter", [&] {
    DLAUNCH_NCCL_CHECK(ncclGroupStart(), comm_);
    if (rank_ == root) {
      for (int p = 0; p < size_; ++p) {
        DLAUNCH_NCCL_CHECK(ncclSend(static_cast<char*>(in.ptr) + p * out.bytes(), out.count,
                                    NcclType(out.dtype), p, AsComm(comm_), AsStream(stream_)),
                           comm_);
      }
    }
    DLAUNCH_NCCL_CHECK(
        ncclRecv(out.ptr, out.count, NcclType(out.dtype), root, AsComm(comm_), AsStream(stream_)),
        comm_);
    return DLAUNCH_NCCL_CHECK(ncclGroupEnd(), comm_);
  });
}

std::shared_ptr<Work> NcclCommunicator::AllToAllV(Buffer in, std::vector<size_t> in_counts,
                                                  Buffer out, std::vector<size_t> out_counts) {
  check_.AllToAllV(in, in_counts, out, out_counts);
  int64_t seq = recorder_.Record("alltoallv", in.dtype, in.count, in.bytes());
  return Launch({seq}, "alltoallv", [&] {
    const size_t elt = DataTypeSize(in.dtype);
    const std::vector<size_t> in_at = BlockOffsets(in_counts, elt);
    const std::vector<size_t> out_at = BlockOffsets(out_counts, elt);
    DLAUNCH_NCCL_CHECK(ncclGroupStart(), comm_);
    for (int p = 0; p < size_; ++p) {
      // A zero-count send/recv is legal in NCCL, but skipping it spares a connection.
      if (in_counts[p] > 0) {
        DLAUNCH_NCCL_CHECK(ncclSend(static_cast<char*>(in.ptr) + in_at[p], in_counts[p],
                                    NcclType(in.dtype), p, AsComm(comm_), AsStream(stream_)),
                           comm_);
      }
      if (out_counts[p] > 0) {
        DLAUNCH_NCCL_CHECK(ncclRecv(static_cast<char*>(out.ptr) + out_at[p], out_counts[p],
                                    NcclType(out.dtype), p, AsComm(comm_), AsStream(stream_)),
                           comm_);
      }
    }
    return DLAUNCH_NCCL_CHECK(ncclGroupEnd(), comm_);
  });
}

}  // namespace dlaunch::core
