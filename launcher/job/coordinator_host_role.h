// Node 0 of several: its coordinator is the job's, reachable at --rdzv-endpoint. It holds the node
// rendezvous of every attempt, stops the other nodes when an attempt fails, and waits for their
// say in its verdict.
#pragma once

#include <optional>
#include <string>

#include "launcher/job/node_zero_role.h"

namespace dlaunch::launcher {

class CoordinatorHostRole : public NodeZeroRole {
 public:
  // `host`: this machine's name, as the other nodes see it in the rendezvous.
  CoordinatorHostRole(const LaunchOptions& o, NodeSetup setup, std::string host);

  // Listens on the endpoint's port (beyond loopback: the other nodes must reach it). Throws
  // UsageError when another process listens there.
  void Listen();

  JobIdentity Prepare() override;
  bool Open(JobPlan* plan, Supervisor* supervisor) override;
  void OnTick() override;
  // A rank of this node failed: but one of another node may have failed first, and its fallout
  // (a peer gone) reached this node's ranks before its node's notice did. The other nodes stop,
  // and say how their ranks ended, before the choice.
  std::optional<size_t> RootCause(const AttemptResult& result, std::string* elsewhere) override;
  void Conclude(AttemptReport* report, SummaryInfo* summary) override;
  void Close(const AttemptReport& last) override;

 protected:
  int LostNodes() override;
  bool Rejoin(Membership* next, AttemptReport* report) override;

 private:
  // Tells every other node to stop the attempt, once per attempt.
  void Abort(int attempt, const std::string& reason);
  // "3", or "2 to 4" for an elastic job.
  std::string NodeCount() const;

  std::string host_;
  int aborted_attempt_ = -1;
};

}  // namespace dlaunch::launcher
