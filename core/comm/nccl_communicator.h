// The GPU backend: NCCL on one CUDA device per rank. The communicator is created non-blocking
// (ncclConfig_t.blocking = 0) because NCCL has no timeout of its own: only a non-blocking
// communicator can be polled (ncclCommGetAsyncError) and aborted (ncclCommAbort) by the watchdog
// while an op hangs. Built only with DLAUNCH_WITH_NCCL; nccl.h stays inside the .cc files
// (nccl_check.h). Ops can be captured into a CUDA graph (Capture, nccl_graph.cc) and buffers
// registered with NCCL (AllocateRegistered, nccl_buffers.cc), as nccl-tests' -G and -R do.
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
  // A group of ncclSend/ncclRecv, one pair per peer with a non-empty block.
  std::shared_ptr<Work> AllToAllV(Buffer in, std::vector<size_t> in_counts, Buffer out,
                                  std::vector<size_t> out_counts) override;
  // Stream capture in thread-local mode: no other thread may issue ops on this communicator
  // while `issue` runs.
  std::unique_ptr<OpGraph> Capture(const std::function<void()>& issue) override;
  void Abort() override;
  FlightRecorder& flight_recorder() override { return recorder_; }

  DeviceType device_type() const override { return DeviceType::kCuda; }
  std::shared_ptr<void> Allocate(size_t bytes) override;
  void CopyIn(Buffer dst, const void* host) override;
  void CopyOut(void* host, Buffer src) override;
  // ncclMemAlloc'ed memory, rounded up to NCCL's window alignment; kLocal ncclCommRegister's it,
  // kSymmetric ncclCommWindowRegister's it (collective). Throws UsageError when the NCCL
  // built against or loaded is too old (nccl_plan.h).
  std::shared_ptr<void> AllocateRegistered(size_t bytes, BufferRegistration reg) override;

 private:
  friend class NcclGraph;

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
  // Drops a registration made by AllocateRegistered; nothing once aborted.
  void Deregister(BufferRegistration reg, void* handle);
  // Launches an instantiated graph (cudaGraphExec_t) `times` times as one tracked op.
  std::shared_ptr<Work> LaunchGraph(void* exec, int times, int ops);

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
  // Set while Capture runs: Launch records ops into the graph instead of tracking their events.
  std::atomic<bool> capturing_{false};
  int captured_ops_ = 0;       // under launch_mu_
  std::string capture_error_;  // under launch_mu_: the first op that failed while capturing
  std::mutex pending_mu_;
  std::deque<Pending> pending_;
};

}  // namespace dlaunch::core
