#include "launcher/job/events_listener.h"

#include "launcher/job/report.h"

namespace dlaunch::launcher {

void EventsListener::OnAttemptStart(const Membership& m) {
  log_->SetAttempt(m.attempt);
  said_.clear();
}

void EventsListener::OnRankChange(const AttemptResult& now) { EmitRankEvents(now); }

void EventsListener::OnRanksGone(AttemptResult* result) { EmitRankEvents(*result); }

void EventsListener::OnRestart(const Membership& next, const std::string& how,
                               const AttemptReport& ended) {
  EmitDecision(ended);
  rundir::JobEvent e;
  e.kind = rundir::JobEventKind::kRestart;
  e.attempt = next.attempt;
  e.message = how + " after: " + ended.error;
  log_->Emit(std::move(e));
}

void EventsListener::OnJobEnd(const AttemptReport& last) { EmitDecision(last); }

void EventsListener::EmitDecision(const AttemptReport& ended) {
  if (!ended.restart_decision) return;
  rundir::JobEvent e;
  e.kind = rundir::JobEventKind::kRestartDecision;
  e.message = DescribeDecision(*ended.restart_decision);
  log_->Emit(std::move(e));
}

rundir::JobEvent EventsListener::RankEvent(rundir::JobEventKind kind, const RankOutcome& r,
                                           int64_t unix_ms) const {
  rundir::JobEvent e;
  e.kind = kind;
  e.rank = r.rank;
  e.host = host_;
  e.pid = r.pid;
  e.unix_ms = unix_ms;
  return e;
}

void EventsListener::EmitRankEvents(const AttemptResult& now) {
  for (const RankOutcome& r : now.ranks) {
    int& was = said_[r.rank];  // 0 nothing, 1 started, 2 exited
    if (was == 0 && r.pid > 0) {
      log_->Emit(RankEvent(rundir::JobEventKind::kRankStart, r, r.start_unix_ms));
      was = 1;
    }
    if (was == 1 && r.exited) {
      rundir::JobEvent e = RankEvent(rundir::JobEventKind::kRankExit, r, r.end_unix_ms);
      if (r.signal) {
        e.signal = SignalName(r.signal);
      } else {
        e.exit_code = r.exit_code;
      }
      e.message = DescribeExit(r);
      log_->Emit(std::move(e));
      was = 2;
    }
  }
}

}  // namespace dlaunch::launcher
