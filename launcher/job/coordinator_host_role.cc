#include "launcher/job/coordinator_host_role.h"

#include <iostream>
#include <vector>

#include "core/exit_codes.h"
#include "launcher/doctor/doctor.h"
#include "launcher/launch_checks.h"

namespace dlaunch::launcher {

CoordinatorHostRole::CoordinatorHostRole(const LaunchOptions& o, NodeSetup setup, std::string host)
    : NodeZeroRole(o, std::move(setup), "0.0.0.0"), host_(std::move(host)) {
  master_addr_ =
      o.master_addr == "127.0.0.1" ? SplitEndpoint(setup_.endpoint).first : o.master_addr;
}

void CoordinatorHostRole::Listen() {
  if (!coordinator_) Serve("0.0.0.0:" + std::to_string(SplitEndpoint(setup_.endpoint).second));
}

JobIdentity CoordinatorHostRole::Prepare() {
  Listen();
  return {run_id_, master_addr_, master_port_, setup_.endpoint, Membership{}, false};
}

bool CoordinatorHostRole::Open(JobPlan* plan, Supervisor* supervisor) {
  supervisor_ = supervisor;
  coordinator_->Watch(*plan, supervisor);
  std::cerr << "dlaunch: node 0, coordinator on " << setup_.endpoint << ", waiting for "
            << NodeCount() << " nodes" << std::endl;
  Membership first = plan->membership();
  AttemptReport failed;
  if (!Rejoin(&first, &failed)) {
    coordinator_->handler().Finish(failed.exit_code, failed.error);
    ended_ = failed;
    return false;
  }
  plan->SetMembership(first);
  world_size_ = plan->world_size();
  coordinator_->Watch(*plan, supervisor);
  std::vector<std::string> fingerprints;
  for (const auto& n : coordinator_->handler().Nodes()) fingerprints.push_back(n.doctor_json);
  for (const auto& w : CompareFingerprints(fingerprints)) {
    std::cerr << "dlaunch: warning: " << w << std::endl;
  }
  return true;
}

void CoordinatorHostRole::OnTick() {
  NodeZeroRole::OnTick();
  coordinator_->handler().CheckNodes();  // a silent node stops the attempt through OnNodeFault
}

std::optional<size_t> CoordinatorHostRole::RootCause(const AttemptResult& result,
                                                     std::string* elsewhere) {
  const RankOutcome& first = result.ranks[*result.first_failure];
  Abort(coordinator_->attempt(),
        "rank " + std::to_string(first.rank) + " failed: " + DescribeExit(first));
  coordinator_->handler().WaitForNodesDone();
  return NodeZeroRole::RootCause(result, elsewhere);
}

void CoordinatorHostRole::Conclude(AttemptReport* report, SummaryInfo* summary) {
  CoordinatorHandler& h = coordinator_->handler();
  if (report->exit_code != 0) Abort(report->attempt, report->error);
  // Node 0's ranks are done; the attempt is done when every node says so.
  auto fault = h.WaitForNodesDone();
  if (fault && report->exit_code == 0) {
    report->exit_code = kExitRankFailed;
    report->error = fault->message;
    std::cerr << "dlaunch: " << fault->message << std::endl;
  }
  summary->nodes = h.Nodes();
}

void CoordinatorHostRole::Close(const AttemptReport& last) {
  CoordinatorHandler& h = coordinator_->handler();
  h.Finish(last.exit_code, last.error);
  // The other nodes take the verdict before the coordinator goes away.
  h.WaitForNodesToLeave(options_.close_timeout);
  NodeZeroRole::Close(last);
}

int CoordinatorHostRole::LostNodes() {
  return static_cast<int>(coordinator_->handler().LostNodes().size());
}

bool CoordinatorHostRole::Rejoin(Membership* next, AttemptReport* report) {
  CoordinatorHandler& h = coordinator_->handler();
  if (next->attempt > 0) h.OpenRound();
  auto round =
      h.JoinRound(host_, DoctorFingerprintJson(), next->restart_count, next->attempt_folder);
  if (const int signal = interrupted_.load()) {
    MarkInterrupted(report, signal, "while waiting for nodes");
    std::cerr << "dlaunch: " << report->error << "; no rank of attempt " << next->attempt
              << " started" << std::endl;
    return false;
  }
  if (!round.error.empty()) {
    std::cerr << "dlaunch: " << round.error << std::endl;
    report->exit_code = kExitRankFailed;
    report->error = round.error;
    return false;
  }
  next->attempt = round.attempt;
  next->node_rank = 0;
  next->nnodes = round.nnodes;
  std::cerr << "dlaunch: node rendezvous of attempt " << round.attempt << ": "
            << Plural(round.nnodes, "node") << std::endl;
  return true;
}

void CoordinatorHostRole::Abort(int attempt, const std::string& reason) {
  if (aborted_attempt_ == attempt) return;
  aborted_attempt_ = attempt;
  v1::Command abort;
  abort.set_kind(v1::Command::ABORT);
  abort.set_reason(reason);
  abort.set_attempt(attempt);
  coordinator_->handler().BroadcastToNodes(abort);
}

std::string CoordinatorHostRole::NodeCount() const {
  const int min = options_.min_nodes > 0 ? options_.min_nodes : options_.nnodes;
  if (min == options_.nnodes) return std::to_string(min);
  return std::to_string(min) + " to " + std::to_string(options_.nnodes);
}

}  // namespace dlaunch::launcher
