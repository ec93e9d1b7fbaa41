// Node 1..N-1: joins node 0's coordinator once per attempt, reports its ranks over one stream,
// obeys ABORT, and copies its ranks' files into node 0's run directory.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/job/node_roles.h"
#include "launcher/rendezvous/node_agent.h"
#include "launcher/rendezvous/rank_relay.h"

namespace dlaunch::launcher {

class JoiningNodeRole : public NodeRole {
 public:
  // `host`: this machine's name, as node 0 sees it in the rendezvous. Connects nothing yet.
  JoiningNodeRole(const LaunchOptions& o, NodeSetup setup, std::string host);
  // Waits for an answer to node 0's STACKS that is still being captured.
  ~JoiningNodeRole() override;

  void Interrupt(int signal) override;
  JobIdentity Prepare() override;
  bool Open(JobPlan* plan, Supervisor* supervisor) override;
  void OnTick() override;
  // This node's ranks report to node 0's coordinator, which holds their errors.
  std::string RankError(int) override { return ""; }
  // Node 0 has every file of the attempt before it hears that this node is done.
  void Conclude(AttemptReport* report, SummaryInfo*) override;
  void Explain(const AttemptReport&) override {}  // node 0 explains the job
  bool Next(AttemptReport* report, JobPlan* plan, std::string* how,
            const std::function<void()>& put_away) override;
  void Close(const AttemptReport& last) override;

 private:
  v1::NodeRequest Request(int attempt) const;
  // A join of an elastic job waits for the round's last call too.
  std::chrono::milliseconds JoinWait() const;
  static Membership MembershipOf(const v1::NodeResponse& resp);
  // The attempt in `plan` is about to run.
  void Started(const JobPlan& plan);
  std::map<int, std::string> RankDirs();
  // Node 0 diagnoses a hang. DUMP: this node's Python ranks get it through their agents' request
  // file, its native ranks down their heartbeat streams to this launcher. STACKS: the stacks of the
  // ranks it names that are this node's, then every file pushed, then the answer; on a thread of
  // its own, since gdb takes seconds and the stream must go on reading.
  void OnCommand(const v1::Command& cmd, Supervisor* supervisor);
  v1::NodeStatus Status(Supervisor* supervisor);
  // Under mu_: the status with the answer to node 0's last STACKS.
  v1::NodeStatus WithStacks(v1::NodeStatus s) const;
  v1::NodeStatus FinalStatus(const AttemptReport& report);

  LaunchOptions options_;
  NodeSetup setup_;
  std::string host_;
  std::shared_ptr<core::CoordinatorClient> client_;
  std::unique_ptr<RankRelay> relay_;  // from the join on; outlives the agent's stream thread
  std::unique_ptr<NodeAgent> agent_;
  int member_id_ = 0;
  bool joined_ = false;
  std::atomic<int> interrupted_{0};  // the signal Interrupt was given
  std::atomic<int> attempt_{0};
  std::atomic<bool> coordinator_lost_{false};
  std::mutex mu_;
  int node_rank_ = 0;
  std::optional<v1::NodeStatus> done_;  // this node's verdict on the attempt, once it is over
  std::map<int, std::string> rank_dirs_;
  int stacks_answered_ = 0;  // node 0's last STACKS this node answered, and what it saw
  std::vector<v1::RankProcess> processes_;
  std::thread stacks_;
};

}  // namespace dlaunch::launcher
