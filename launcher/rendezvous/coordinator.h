// The coordinator: rendezvous, key/value store, heartbeats and event intake for one job.
// CoordinatorHandler holds the logic and is tested without a network; CoordinatorServer is the
// thin gRPC glue in front of it (Ray's *ServiceHandler split).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/coordinator_client.h"
#include "core/error.h"
#include "core/store.h"
#include "dlaunch.pb.h"
#include "launcher/rendezvous/call_waiters.h"
#include "launcher/rendezvous/credentials.h"
#include "launcher/rendezvous/node_roster.h"
#include "launcher/rendezvous/node_rounds.h"
#include "launcher/rendezvous/push_quota.h"
#include "launcher/rendezvous/refusal_log.h"
#include "launcher/rendezvous/store_quota.h"

namespace grpc {
class Server;
}

namespace dlaunch::launcher {

struct CoordinatorConfig {
  int world_size = 1;
  int nproc_per_node = 1;
  int nnodes = 1;                                  // MAX of --nnodes MIN:MAX
  int min_nodes = 0;                               // MIN; 0: nnodes
  std::chrono::milliseconds join_timeout{0};       // the node rendezvous; 0: rdzv_timeout
  std::chrono::milliseconds last_call_timeout{0};  // MIN joined: how long to wait for more
  std::string master_addr;                         // given to every node's ranks
  int master_port = 0;
  std::string token;
  std::string run_id;
  std::string run_dir;
  std::string job_id;  // NodeRequest.job_id; "": any
  std::chrono::milliseconds rdzv_timeout{300000};
  std::chrono::milliseconds node_heartbeat_timeout{30000};  // a silent node counts as lost
  StoreLimits store_limits;                                 // of each rank's store writes
};

// The coordinator's notices to the job. Called on a gRPC thread (or the thread that called
// CheckNodes); must not block.
class CoordinatorListener {
 public:
  virtual ~CoordinatorListener() = default;
  // A rank reported an event.
  virtual void OnRankEvent(const v1::Event& event) = 0;
  // The rank rendezvous of this attempt timed out; once per attempt. `message` names the absent.
  virtual void OnRendezvousTimeout(const std::string& message) = 0;
  // A node failed or is lost; once per node.
  virtual void OnNodeFault(const NodeFault& fault) = 0;
};

// What the coordinator knows of one rank, for the supervisor and the hang monitor.
struct RankView {
  int rank = -1;
  bool registered = false;
  bool streaming = false;  // a heartbeat stream is open now
  std::optional<v1::RankStatus> status;
  int64_t last_heartbeat_unix_ms = 0;
  int64_t last_progress_unix_ms = 0;  // last time step or completed seq moved
};

struct JobShape;  // launcher/rendezvous/request_checks.h

class CoordinatorHandler {
 public:
  explicit CoordinatorHandler(CoordinatorConfig config);
  // Prints the count of refused calls not printed yet.
  ~CoordinatorHandler();

  // What `token` admits: the job token everything, a RankToken the rank calls of its rank. Does
  // not block.
  Caller CallerOf(const std::string& token) const;
  // Does not block. False (and a line on stderr naming `peer` and `method`, rate-limited) for a
  // token that does not admit `needed`.
  bool Authorize(const std::string& token, const std::string& peer, const char* method,
                 CallerRole needed = CallerRole::kRank);
  // For a rank call about rank `rank` (its Register, Heartbeat, ReportEvent): true for the job
  // token and for that rank's own token; else false, refused as Authorize refuses. Does not block.
  bool AuthorizeRank(const std::string& token, const std::string& peer, const char* method,
                     int rank);
  // For the node calls: the member id of the node whose credential `node_credential` is, when
  // `token` is the job token; else nullopt, refused as Authorize refuses. Does not block.
  std::optional<int> AuthorizeNode(const std::string& token, const std::string& node_credential,
                                   const std::string& peer, const char* method);
  // Logs a refused call (rate-limited: the first few of every 10 s, then a count). Does not block.
  void Refuse(const std::string& peer, const char* method, const std::string& why);
  int64_t refused_calls() const { return refusals_.total(); }

  // Blocks until every rank registered or the rendezvous deadline (start of the attempt plus
  // rdzv_timeout) passes; then returns DEADLINE_EXCEEDED naming the absent ranks.
  v1::RegisterResponse Register(const v1::RegisterRequest& req);

  // The server's Register and store waits, which hold no thread while they wait (call_waiters.h).
  // Each records the call at once (Register throws Error(kInvalidArgument) for a rank outside
  // the world), then runs `done` exactly once, maybe before it returns: with the response, or
  // with the Error the blocking call would throw. The waiter returned (nullptr when `done` ran
  // already) is for CancelWait, when the caller goes away. Do not block.
  using RegisterDone = std::function<void(const v1::RegisterResponse*, const Error*)>;
  std::shared_ptr<CallWaiters::Waiter> StartRegister(const v1::RegisterRequest& req,
                                                     RegisterDone done);
  using StoreDone = std::function<void(const Error*)>;
  // Until every key of `keys` is in the store, at most `timeout`.
  std::shared_ptr<CallWaiters::Waiter> StartStoreWait(std::vector<std::string> keys,
                                                      std::chrono::milliseconds timeout,
                                                      StoreDone done);
  void CancelWait(const std::shared_ptr<CallWaiters::Waiter>& waiter) { waiters_.Cancel(waiter); }
  // A key was set or added: the store waits it completes end. Does not block for long.
  void StoreChanged() { waiters_.Poke(); }

  // Whether every rank of the attempt registered. Does not block.
  bool AllRegistered() const;

  // The attempt's store as the launcher sees it: no StoreQuota.
  core::Store& store() { return *store_; }
  // The store calls' writes. Sets `key` to `value` for `caller`: a rank within
  // config().store_limits (store_quota.h), a launcher (the job token) unbounded. "" when set (the
  // store waits it completes end), else the bound it would pass, one line, and the store is
  // unchanged. Throws Error(kUnauthenticated) for a caller with no role. Does not block.
  std::string StoreSet(const Caller& caller, const std::string& key, const std::string& value);
  // Adds `delta` to the counter `key` for `caller` as StoreSet sets; *value is the new value.
  // Throws as Store::Add does (Error(kInvalidArgument): no number, an overflow), the store and
  // the quota unchanged. Does not block.
  std::string StoreAdd(const Caller& caller, const std::string& key, int64_t delta, int64_t* value);

  // Do not block.
  void OnHeartbeat(const v1::RankStatus& status);
  void OnStreamOpened(int rank, std::function<bool(const v1::Command&)> send);
  void OnStreamClosed(int rank);
  void OnEvent(const v1::Event& event);

  // Sends a command to every rank with an open heartbeat stream; returns how many got it.
  int Broadcast(const v1::Command& command);

  // The server goes: every Register and RegisterNode still waiting returns (kPeerGone) now
  // instead of at its deadline, so a call nobody will answer (a forged Register for a rank that
  // never comes) cannot hold the shutdown. Does not block.
  void Stop();

  // Forgets registrations, store and streams for a new attempt (after a restart). Does not block.
  void Reset();

  std::vector<RankView> Snapshot() const;
  // Blocks until rank's latest heartbeat satisfies `pred`, at most `timeout`; false on timeout.
  bool WaitForStatus(int rank, const std::function<bool(const v1::RankStatus&)>& pred,
                     std::chrono::milliseconds timeout);
  // Where the notices go; `listener` outlives the handler's service (nullptr: nowhere).
  void SetListener(CoordinatorListener* listener);

  const CoordinatorConfig& config() const { return config_; }

  // ---- `dlaunch status` (GetStatus)
  // The status token, which admits GetStatus only, and the document's source (it must not block
  // for long, and outlives the server). Does not block.
  void SetStatusSource(std::string status_token, std::function<std::string()> source);
  // Whether `token` (the job token or the status token) may read the status; refused as
  // Authorize refuses. Does not block.
  bool AuthorizeStatus(const std::string& token, const std::string& peer);
  // The source's document; "" before SetStatusSource. Blocks as the source does.
  std::string StatusJson() const;

  // ---- multi-node: one node rendezvous round per attempt (node_rounds.h)
  // What a round gave node 0: its node count, or why it failed.
  struct Round {
    int attempt = 0;
    int nnodes = 0;
    std::string error;  // "" when the round closed
  };
  // Node 0 joins the forming round, which starts attempt `round()` with `restart_count` and
  // whose rank folders go to `attempt_folder` once it is over. Blocks until the round closes
  // (or fails: the join timeout passed with fewer than MIN nodes).
  Round JoinRound(const std::string& host, const std::string& doctor_json, int restart_count,
                  const std::string& attempt_folder);
  // A node agent joins a round the same way, or waits for the next one when this attempt runs
  // already; answers "finished" once the job ended. A node's first join (member id 0) gets its
  // member id and node credential; a later one must bring that credential. Throws
  // Error(kTimeout) when no round took it within the join timeout, Error(kInvalidArgument) for a
  // request that does not fit, Error(kUnauthenticated) for a member id without its credential.
  v1::NodeResponse RegisterNode(const v1::NodeRequest& req,
                                const std::string& node_credential = "");
  // Why a node of another job reached this coordinator ("this is the coordinator of ..., not of
  // this node's ..."); "" when the job ids match or one is not known, and for a `token` that is
  // not the job token: a caller without it learns nothing of this job, its run id included, nor
  // whether the job id it names is this one's. Does not block.
  std::string OtherJob(const std::string& token, const v1::NodeRequest& req) const;
  // After an attempt that another follows: the next round is open for joining. Does not block.
  void OpenRound();
  // The job ended with `exit_code`: every node waiting for a round gets this verdict.
  void Finish(int exit_code, const std::string& reason);
  // After Finish: blocks until every node of the last round, and every node waiting in
  // RegisterNode, took the verdict or went away, at most `timeout`.
  void WaitForNodesToLeave(std::chrono::milliseconds timeout);
  // Do not block. A node that fails or is lost goes to the listener's OnNodeFault. The member id
  // is the one AuthorizeNode found (CoordinatorServer puts it in `status`); member 0, node 0
  // itself, never speaks through a stream and is ignored.
  void OnNodeStatus(const v1::NodeStatus& status);
  void OnNodeStreamOpened(int member_id, std::function<bool(const v1::Command&)> send);
  void OnNodeStreamClosed(int member_id);
  // Does not block: tells the listener of nodes silent past node_heartbeat_timeout.
  void CheckNodes();
  int BroadcastToNodes(const v1::Command& command);
  // Blocks until every agent node of the attempt said it is done; returns the first node that
  // failed or was lost meanwhile, nullopt when all succeeded.
  std::optional<NodeFault> WaitForNodesDone();
  std::vector<NodeView> Nodes() const;
  // Blocks until `done` holds for the nodes of the attempt (checked at every node status and
  // stream end), at most `timeout`; false on timeout.
  bool WaitForNodes(const std::function<bool(const std::vector<NodeView>&)>& done,
                    std::chrono::milliseconds timeout);
  // The node ranks of the attempt lost so far (their stream ended, or they fell silent).
  std::vector<int> LostNodes() const;
  // Writes member `member_id`'s chunk into <run_dir>/rank<R>/<name>. Throws
  // Error(kInvalidArgument) for a member that is no agent node of the attempt, a rank that is not
  // one of its node's, or a name that leaves the rank's folder. A chunk past the node's PushQuota
  // is dropped (node 0 says so once per node and attempt); returns false then. Blocks for the
  // write.
  bool WriteFileChunk(int member_id, const v1::FileChunk& chunk);

 private:
  using Senders = std::map<int, std::function<bool(const v1::Command&)>>;
  // Sends `command` down every stream in `which` (ranks' or nodes'), outside the lock.
  int SendToAll(Senders CoordinatorHandler::*which, const v1::Command& command);
  // Unlocks `lock`, then tells the listener of `faults`.
  void Notify(std::unique_lock<std::mutex>& lock, const std::vector<NodeFault>& faults);
  // Under mu_: joins `member` to the forming round (or waits for the next one) until a round
  // with it closed; its node rank, or nullopt when the job finished. Throws like RegisterNode.
  std::optional<int> WaitInRound(std::unique_lock<std::mutex>& lock, const RoundMember& member,
                                 int attempt);
  // Under mu_: the forming round closes; the attempt's world and roster follow from it.
  void CloseRound();
  // Under mu_: records a registration; throws Error(kInvalidArgument) for a rank outside the
  // world.
  void RecordLocked(const v1::RegisterRequest& req);
  // Under mu_: every rank registered, or the server goes.
  bool RendezvousOverLocked() const;
  // With `lock` held: rank's response once the rendezvous is over, or the Error (the timeout's
  // naming the absent ranks, told to the listener once; unlocks then).
  v1::RegisterResponse Outcome(std::unique_lock<std::mutex>& lock, int rank);
  // Under mu_: a heartbeat of `status.rank()`, in the world, heard at `now`.
  void HeardLocked(const v1::RankStatus& status, int64_t now);
  // Under mu_: the last round's members still connected (they are awaited in the next round).
  std::set<int> ConnectedMembers() const;

  CoordinatorConfig config_;
  // The world of the attempt that runs, for the request checks; ShapeLocked with mu_ held.
  JobShape Shape() const;
  JobShape ShapeLocked() const;
  // The writer StoreQuota counts `caller`'s store writes for.
  static int WriterOf(const Caller& caller);
  // The attempt's store (Reset replaces it). Takes mu_.
  std::shared_ptr<core::Store> CurrentStore() const;

  mutable std::mutex mu_;
  std::condition_variable registered_cv_;
  std::condition_variable status_cv_;
  std::chrono::steady_clock::time_point attempt_start_;
  std::map<int, v1::RegisterRequest> registered_;
  std::shared_ptr<core::Store> store_;
  // Taken before mu_: a store write, its quota check and its record are one step, and Reset
  // replaces store and quota together.
  std::mutex store_mu_;
  StoreQuota store_quota_;  // under store_mu_
  std::map<int, RankView> ranks_;
  Senders senders_;
  CoordinatorListener* listener_ = nullptr;
  bool rdzv_failure_reported_ = false;
  bool stopping_ = false;
  std::condition_variable nodes_cv_;
  NodeRoster nodes_;  // the attempt's nodes, by node rank
  NodeRounds rounds_;
  int world_size_ = 0;     // of the attempt
  int restart_count_ = 0;  // of the forming or running round
  std::string attempt_folder_;
  std::string round_failure_;
  std::optional<std::pair<int, std::string>> finished_;  // the job's exit code and reason
  std::set<int> connected_;                              // member ids with a node stream open
  std::set<int> answered_;                               // member ids told the job finished
  std::map<int, RoundMember> waiting_;                   // nodes waiting for the next round to open
  int registering_ = 0;                                  // RegisterNode calls under way
  Senders node_senders_;                                 // by member id
  std::map<int, std::string> node_credentials_;          // by member id
  PushQuota pushed_;                                     // of the attempt's nodes
  std::set<int> told_dropped_;                           // node ranks told their push was cut
  RefusalLog refusals_;
  std::mutex files_mu_;
  std::string status_token_;  // under mu_
  std::function<std::string()> status_source_;
  CallWaiters waiters_;  // Register and store calls the server holds; ended first
};

class CoordinatorServer {
 public:
  // Starts serving on `address` ("127.0.0.1:0" picks a free port). Throws UsageError when the
  // address cannot be bound (a port in use, say).
  CoordinatorServer(CoordinatorHandler* handler, const std::string& address,
                    const core::TlsFiles& tls = {});
  ~CoordinatorServer();

  int port() const { return port_; }
  // Stops the handler's waits, then blocks until in-flight calls end, at most `deadline`;
  // streams are cancelled.
  void Shutdown(std::chrono::milliseconds deadline = std::chrono::milliseconds(500));

 private:
  class Service;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  CoordinatorHandler* handler_;
  int port_ = 0;
};

}  // namespace dlaunch::launcher
