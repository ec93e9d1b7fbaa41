// The CPU backend: gloo's TCP transport, one worker thread running the ops of this communicator
// in call order (ops never overlap, so gloo tags cannot collide), and a Watchdog. With the
// shared-memory transport (CommOptions::transport), allreduce, broadcast, allgather,
// reduce_scatter and barrier run hierarchically: through a ShmGroup among the ranks of each host,
// and gloo over TCP among the hosts' leaders; send/recv between ranks of one host go through the
// ShmGroup too; the other ops stay on gloo's full mesh.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/comm/async_work.h"
#include "core/comm/call_check.h"
#include "core/comm/comm_options.h"
#include "core/comm/communicator.h"
#include "core/comm/flight_recorder.h"
#include "core/comm/host_topology.h"
#include "core/comm/watchdog.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace dlaunch::core {

class ShmGroup;

class GlooCommunicator : public Communicator {
 public:
  // Blocks for the full-mesh rendezvous through options.store (at most rendezvous_timeout).
  explicit GlooCommunicator(const CommOptions& options);
  // Blocks until the op in progress ends (at most the collective timeout).
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "gloo"; }
  // "shm" when collectives run on shared memory inside the host, else "tcp".
  const char* transport() const { return hierarchical_ ? "shm" : "tcp"; }
  const char* CollectivePath(int peer) const override;

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
  // On gloo's full mesh (TCP) in either transport: the shared-memory groups have no alltoall.
  std::shared_ptr<Work> AllToAllV(Buffer in, std::vector<size_t> in_counts, Buffer out,
                                  std::vector<size_t> out_counts) override;
  void Abort() override;
  FlightRecorder& flight_recorder() override { return recorder_; }

 private:
  struct Task {
    std::vector<int64_t> seqs;
    std::string op;
    std::function<void()> run;
    std::shared_ptr<AsyncWork> work;
  };

  std::shared_ptr<Work> Enqueue(std::vector<int64_t> seqs, const std::string& op,
                                std::function<void()> run);
  void Loop();
  // Runs the queue up to and including `work` on the calling thread (waiting, until `deadline`,
  // for an op already running to end) unless `work` has already started.
  void RunHere(AsyncWork& work, std::chrono::steady_clock::time_point deadline);
  bool Queued(const AsyncWork& work) const;  // under mu_
  void RunTask(Task& task);
  void TakeHead(Task* task);  // under mu_: the queue's head becomes the running op
  void Release();             // the running op is over
  std::string Describe(const std::string& op, int64_t seq) const;
  uint32_t NextTag();
  // Chooses the transport (options.transport) and builds the host groups and the leaders'
  // context. Blocks for their rendezvous.
  void SetUpTransport(const CommOptions& options, const std::shared_ptr<Store>& store,
                      std::shared_ptr<gloo::transport::Device> device);

  // Run on the worker thread; block for at most timeout_ each. The Hier ones: inside the host on
  // shared memory, between hosts on gloo among the leaders.
  void RunHierAllReduce(Buffer buf, ReduceOp op, uint32_t tag);
  void RunHierBroadcast(Buffer buf, int root, uint32_t tag);
  void RunHierAllGather(Buffer in, Buffer out, uint32_t tag);
  void RunHierReduceScatter(Buffer in, Buffer out, ReduceOp op, uint32_t tag);
  void RunHierBarrier(uint32_t tag);
  void RunSendRecv(const Buffer* send, int dst, uint64_t send_slot, const Buffer* recv, int src,
                   uint64_t recv_slot);
  // Send/recv with peers on this host: shared memory when this rank has a host group.
  bool SharesHost(int peer) const;
  void RunShmSendRecv(const Buffer* send, int dst, const Buffer* recv, int src);

  const int rank_;
  const int size_;
  const std::chrono::milliseconds timeout_;
  const CallCheck check_;
  FlightRecorder recorder_;
  std::shared_ptr<gloo::Context> context_;
  // Shared-memory transport: set up once, before the worker starts.
  bool hierarchical_ = false;
  HostTopology topology_;
  std::unique_ptr<ShmGroup> shm_;           // this host's ranks; null when alone on the host
  std::shared_ptr<gloo::Context> leaders_;  // one rank per host; null unless a leader of several
  std::shared_ptr<Watchdog> watchdog_;

  // Per-peer p2p message counters: the n-th send to a peer matches its n-th recv from us.
  std::map<int, uint32_t> sends_to_;
  std::map<int, uint32_t> recvs_from_;
  // gloo tag of the next collective: equal on every rank, unlike seq (which counts p2p too).
  uint32_t next_tag_ = 0;

  std::mutex mu_;
  std::condition_variable queue_cv_;
  std::deque<Task> queue_;
  bool stop_ = false;
  bool aborted_ = false;
  bool busy_ = false;  // an op is running, on the worker or on a waiting caller
  // Callers waiting in RunHere for the running op to end, so that they run what follows it.
  int callers_ = 0;
  std::condition_variable callers_cv_;
  // When a caller last ran ops itself; the worker leaves the queue to callers for a short grace
  // after that (see Loop), and sleeps with a timeout meanwhile (worker_polls_).
  std::chrono::steady_clock::time_point caller_ran_{};
  bool worker_polls_ = false;
  std::thread worker_;
};

}  // namespace dlaunch::core
