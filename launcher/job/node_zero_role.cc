#include "launcher/job/node_zero_role.h"

#include <iostream>

#include "core/error.h"
#include "core/exit_codes.h"
#include "core/run_dir/paths.h"
#include "launcher/diagnose/diagnose.h"
#include "launcher/job/failure_facts.h"
#include "launcher/job/node_env.h"
#include "launcher/rendezvous/ports.h"

namespace dlaunch::launcher {
namespace {

// --master-port, or a free one: node 0 decides it for every node.
int ChooseMasterPort(const LaunchOptions& o, const std::string& bind_host) {
  if (o.master_port == 0) return PickFreePort(bind_host);
  if (!PortIsFree(bind_host, o.master_port)) {
    throw UsageError("--master-port " + std::to_string(o.master_port) +
                     " is already in use on this machine (leave it out and dlaunch picks a free "
                     "one)");
  }
  return o.master_port;
}

// The folder attempt<N+1> after attempt<N>.
std::string FolderAfter(const std::string& folder) {
  return rundir::RunDir::AttemptDirName(rundir::RunDir::ParseAttemptDirName(folder).value_or(-1) +
                                        1);
}

}  // namespace

NodeZeroRole::NodeZeroRole(const LaunchOptions& o, NodeSetup setup, const std::string& bind_host)
    : options_(o),
      setup_(std::move(setup)),
      master_port_(ChooseMasterPort(o, bind_host)),
      run_id_(o.run_id.empty() ? NewRunId() : o.run_id) {}

void NodeZeroRole::Explain(const AttemptReport& report) {
  if (report.exit_code == 0 || coordinator_->hang_diagnosed() || report.result.interrupted_by ||
      report.verdict) {
    return;
  }
  // The failure's picture across ranks: each one's last collective, phase and memory. The
  // agent's Judge printed the root-cause block of a rank of this node; when another node's rank
  // failed it printed only a line, so the diagnosis' block names that rank here.
  const Diagnosis d = AnalyzeRunDir(run_dir_, world_size_, report.summary_path);
  std::cerr << (report.root_cause_printed ? FormatDiagnosisAfterRootCause(d) : FormatDiagnosis(d))
            << std::flush;
}

bool NodeZeroRole::Next(AttemptReport* report, JobPlan* plan, std::string* how,
                        const std::function<void()>& put_away) {
  const int lost = LostNodes();
  // A stop for a hang restarts only under --on-hang restart; a stop for a failure elsewhere
  // (another node's rank, a lost node) is a failure like any other.
  const auto& stop = report->result.stop_code;
  const bool hang = stop && *stop == kExitHang;
  const NextAttempt step =
      plan->Decide(report->exit_code, report->result.interrupted_by != 0, hang, lost);
  if (step == NextAttempt::kNone) return false;
  if (step == NextAttempt::kRestart && StopsByPolicy(report, hang)) return false;
  Membership next = plan->membership();
  ++next.attempt;
  if (step == NextAttempt::kRestart) ++next.restart_count;
  next.attempt_folder = FolderAfter(next.attempt_folder);
  *how = step == NextAttempt::kRestart ? "restart" : "rejoin";
  if (step == NextAttempt::kRestart) {
    std::cerr << "dlaunch: restarting all ranks (restart " << next.restart_count << " of "
              << options_.max_restarts << ")" << std::endl;
  } else {
    std::cerr << "dlaunch: " << Plural(lost, "node") << " lost; "
              << Plural(plan->membership().nnodes - lost, "node") << " left (at least "
              << plan->min_nodes() << " needed): going on as attempt " << next.attempt << std::endl;
  }
  put_away();
  // Before any node can start the next attempt's ranks: they register afresh.
  coordinator_->Reset();
  if (!Rejoin(&next, report)) return false;
  plan->SetMembership(next);
  world_size_ = plan->world_size();
  coordinator_->Watch(*plan, supervisor_);
  return true;
}

bool NodeZeroRole::StopsByPolicy(AttemptReport* report, bool hang) {
  rundir::Summary summary;
  std::vector<std::string> problems;
  rundir::ReadSummary(report->summary_path, "summary.json", &summary, &problems);
  failures_.push_back(
      ReadFailureFacts(run_dir_, summary, report->attempt, hang, coordinator_->root_cause_rank()));
  const AppliedDecision applied =
      ApplyRestartPolicy(options_.restart_policy, DecideRestart(failures_));
  std::cerr << "dlaunch: " << DescribeDecision(applied) << std::endl;
  report->restart_decision = applied;
  return applied.acted && applied.decision.action == RestartAction::kStop;
}

void NodeZeroRole::Interrupt(int signal) {
  interrupted_ = signal;
  if (CoordinatorHandler* h = interruptible_.load()) {
    h->Finish(128 + signal, "node 0 was interrupted by " + SignalName(signal));
  }
}

void NodeZeroRole::Serve(const std::string& listen) {
  run_dir_ = options_.log_dir + "/" + run_id_;
  CoordinatorConfig cc;
  cc.world_size = options_.nproc * options_.nnodes;
  cc.nproc_per_node = options_.nproc;
  cc.nnodes = options_.nnodes;
  cc.min_nodes = options_.min_nodes;
  cc.join_timeout = JoinTimeout(options_);
  cc.last_call_timeout = options_.last_call_timeout;
  cc.master_addr = master_addr_;
  cc.master_port = master_port_;
  cc.token = setup_.token;
  cc.run_id = run_id_;
  cc.run_dir = run_dir_;
  cc.job_id = JobIdOf(options_);
  cc.rdzv_timeout = options_.rdzv_timeout;
  cc.node_heartbeat_timeout = options_.heartbeat_timeout;
  coordinator_ = std::make_unique<HostedCoordinator>(cc, listen, setup_.tls);
  if (options_.metrics_port >= 0) {
    coordinator_->ServeMetrics(options_.metrics_addr, options_.metrics_port);
  }
  // A signal that came before there was a coordinator to tell.
  interruptible_ = &coordinator_->handler();
  if (const int signal = interrupted_.load()) Interrupt(signal);
}

}  // namespace dlaunch::launcher
