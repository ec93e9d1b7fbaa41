// The GPU backend: NCCL on one CUDA device per rank. The communicator is created non-blocking
// (ncclConfig_t.blocking = 0) because NCCL has no timeout of its own: only a non-blocking
// communicator can be polled (ncclCommGetAsyncError) and aborted (ncclCommAbort) by the watchdog
// while an op hangs. Built only with DLAUNCH_WITH_NCCL; nccl.h stays inside the .cc.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "core/comm/async_work.h"
#include "core/comm/call_check.h"
#include "core/comm/comm_options.h"
#include "core/comm/communicator.h"
#include "core/comm/flight_recorder.h"
#include "core/comm/watchdog.h"

namespace dlaunch::core {

// Visible CUDA devices; 0 without a driver. Does not block.
int CudaDeviceCount();

class NcclCommunicator : public Communicator {
 public:
  // Blocks for the unique-id exchange and communicator init (at most rendezvous_timeout).
  explicit NcclCommunicator(const CommOptions& options);
  // Blocks until outstanding work is flushed (at most the collective timeout), or aborts.
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }

  std::shared_ptr<Work> AllReduce(Buffer buf, ReduceOp op) override;
  std::shared_ptr<Work> Broadcast(Buffer buf, int root) override;
  std::shared_ptr<Work> AllGather(Buffer in, Buffer out) override;
  std::shared_ptr<Work> ReduceScatter(Buffer in, Buffer out, ReduceOp op) override;
  std::shared_ptr<Work> AllToAll(Buffer in, Buffer out) override;
  std::shared_ptr<Work> Send(Buffer buf, int peer) override;
  std::shared_ptr<Work> Recv(Buffer buf, int peer) override;
  std::shared_ptr<Work> SendRecv(Buffer send, int dst, Buffer recv, int src) override;
  std::shared_ptr<Work> Barrier() override;
  std::shared_ptr<Work> AllReduce(Buffer in, Buffer out, ReduceOp op) override;
  std::shared_ptr<Work> Broadcast(Buffer in, Buffer out, int root) override;
  std::shared_ptr<Work> Reduce(Buffer in, Buffer out, ReduceOp op, int root) override;
  std::shared_ptr<Work> Gather(Buffer in, Buffer out, int root) override;
  std::shared_ptr<Work> Scatter(Buffer in, Buffer out, int root) override;
  void Abort() override;
  FlightRecorder& flight_recorder() override { return recorder_; }

  DeviceType device_type() const override { return DeviceType::kCuda; }
  std::shared_ptr<void> Allocate(size_t bytes) override;
  void CopyIn(Buffer dst, const void* host) override;
  void CopyOut(void* host, Buffer src) override;

 private:
  struct Pending {
    std::vector<int64_t> seqs;
    void* event;  // cudaEvent_t
    std::shared_ptr<AsyncWork> work;
  };

  // Runs `issue` (the NCCL calls of one op) and tracks its completion. Blocks only while NCCL
  // finishes enqueueing (non-blocking communicators may return ncclInProgress), at most timeout_.
  std::shared_ptr<Work> Launch(std::vector<int64_t> seqs, const std::string& op,
                               const std::function<int()>& issue);
  // Wait until an ncclInProgress call has been enqueued; throws on error or timeout.
  void AwaitEnqueued(const std::string& what);
  // Completes finished work and fails everything on an asynchronous NCCL error. Does not block.
  void Poll();
  void FailAll(ErrorKind kind, const std::string& message);

  const int rank_;
  const int size_;
  const std::chrono::milliseconds timeout_;
  const CallCheck check_;
  int device_ = 0;
  FlightRecorder recorder_;
  void* comm_ = nullptr;    // ncclComm_t
  void* stream_ = nullptr;  // cudaStream_t
  std::shared_ptr<void> barrier_buf_;
  std::atomic<bool> aborted_{false};
  std::shared_ptr<Watchdog> watchdog_;

  // Lets work handles drive Poll() without outliving the communicator: emptied by the destructor.
  struct PollTarget {
    std::mutex mu;
    NcclCommunicator* self = nullptr;
  };
  std::shared_ptr<PollTarget> poll_target_ = std::make_shared<PollTarget>();

  std::mutex launch_mu_;  // NCCL calls on one communicator must not interleave
  std::mutex pending_mu_;
  std::deque<Pending> pending_;
};

}  // namespace dlaunch::core
