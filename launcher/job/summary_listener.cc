#include "launcher/job/summary_listener.h"

#include "core/base/clock.h"

namespace dlaunch::launcher {

SummaryListener::SummaryListener(const JobPlan* plan, NodeRole* role, const std::string& host)
    : plan_(plan), role_(role), file_(plan->summary_path()) {
  info_.run_id = plan->identity().run_id;
  info_.host = host;
}

void SummaryListener::OnAttemptStart(const Membership& m) {
  restarts_ = m.restart_count;
  progress_ = {};
  straggler_generation_ = -1;
  AttemptRecord started;
  started.attempt = m.attempt;
  started.restart_count = m.restart_count;
  started.nnodes = m.nnodes;
  started.world_size = plan_->world_size();
  started.start_unix_ms = base::UnixMillis();
  info_.attempts.push_back(started);
}

void SummaryListener::OnRankChange(const AttemptResult& now) {
  progress_ = now;
  file_.WriteProgress(info_, restarts_, now);
}

void SummaryListener::OnTick() {
  if (role_->straggler_generation() == straggler_generation_) return;
  straggler_generation_ = role_->straggler_generation();
  info_.stragglers = role_->Stragglers();
  if (!progress_.ranks.empty()) file_.WriteProgress(info_, restarts_, progress_);
}

void SummaryListener::OnRanksGone(AttemptResult* result) {
  info_.stragglers = role_->Stragglers();
  info_.truncated_logs = result->truncated_logs;
}

namespace {

std::optional<rundir::SummaryDecision> DecisionOf(const AttemptReport& report) {
  if (!report.restart_decision) return std::nullopt;
  const AppliedDecision& a = *report.restart_decision;
  return rundir::SummaryDecision{RestartPolicyName(a.policy),
                                 RestartActionName(a.decision.action),
                                 a.decision.rule,
                                 a.decision.node,
                                 a.decision.reason,
                                 a.acted};
}

}  // namespace

void SummaryListener::OnRestart(const Membership&, const std::string& how,
                                const AttemptReport& ended) {
  current()->next = how;
  current()->decision = DecisionOf(ended);
}

void SummaryListener::EndAttempt(AttemptReport* report) {
  AttemptRecord& record = *current();
  record.end_unix_ms = base::UnixMillis();
  record.exit_code = report->exit_code;
  record.error = report->error;
  info_.restarts = restarts_;
  info_.exit_code = report->exit_code;
  info_.error = report->error;
  file_.Write(info_, report->result.ranks);
  report->summary_path = file_.written_path();
}

void SummaryListener::OnJobEnd(const AttemptReport& last) {
  info_.exit_code = current()->exit_code = last.exit_code;
  info_.error = current()->error = last.error;
  current()->decision = DecisionOf(last);
  file_.Write(info_, last.result.ranks);
}

}  // namespace dlaunch::launcher
