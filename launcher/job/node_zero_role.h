// Node 0, alone or with other nodes: it hosts the coordinator and diagnoses the job. What differs
// between the two (where the coordinator listens, the node rendezvous) is SingleNodeRole's and
// CoordinatorHostRole's.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/job/hosted_coordinator.h"
#include "launcher/job/node_roles.h"

namespace dlaunch::launcher {

class NodeZeroRole : public NodeRole {
 public:
  // Checks --master-port on `bind_host`; throws UsageError.
  NodeZeroRole(const LaunchOptions& o, NodeSetup setup, const std::string& bind_host);

  void OnTick() override { coordinator_->Tick(); }
  void OnRankChange() override { coordinator_->RefreshLive(); }
  void SetEventLog(JobEventLog* log) override {
    if (coordinator_) coordinator_->SetEventLog(log);
  }
  std::vector<rundir::StragglerVerdict> Stragglers() const override {
    return coordinator_ ? coordinator_->Stragglers() : std::vector<rundir::StragglerVerdict>{};
  }
  int straggler_generation() const override {
    return coordinator_ ? coordinator_->straggler_generation() : 0;
  }
  std::string RankError(int rank) override { return coordinator_->RankError(rank); }
  std::optional<size_t> RootCause(const AttemptResult& result, std::string* elsewhere) override {
    return coordinator_->RootCause(result, elsewhere);
  }
  void Explain(const AttemptReport& report) override;
  bool Next(AttemptReport* report, JobPlan* plan, std::string* how,
            const std::function<void()>& put_away) override;
  void Close(const AttemptReport&) override { coordinator_->Shutdown(); }
  // Every node waiting in this coordinator's rendezvous, and node 0's own wait, end with the
  // signal's exit code.
  void Interrupt(int signal) override;

 protected:
  // The nodes of the attempt that were lost.
  virtual int LostNodes() { return 0; }
  // The next attempt's node rendezvous; false (report set) when it failed.
  virtual bool Rejoin(Membership*, AttemptReport*) { return true; }

  // The restart policy after a failed attempt that --max-restarts would restart: its line on the
  // console, the decision in `report`; true when the job stops instead. Blocks for reading the
  // attempt's files.
  bool StopsByPolicy(AttemptReport* report, bool hang);

  // Starts the coordinator for the job this node names.
  void Serve(const std::string& listen);

  LaunchOptions options_;
  NodeSetup setup_;
  int master_port_;
  std::string master_addr_;
  std::string run_id_;
  std::string run_dir_;
  int world_size_ = 0;
  Supervisor* supervisor_ = nullptr;
  std::unique_ptr<HostedCoordinator> coordinator_;
  std::atomic<int> interrupted_{0};  // the signal Interrupt was given
  std::atomic<CoordinatorHandler*> interruptible_{nullptr};
  std::vector<FailureFacts> failures_;  // of the attempts the policy weighed, oldest first
};

}  // namespace dlaunch::launcher
