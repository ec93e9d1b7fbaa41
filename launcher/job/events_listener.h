// --events-file's story of this node's ranks: rank_start and rank_exit as they happen, and
// restart with its reason (the log itself: job_event_log.h).
#pragma once

#include <map>
#include <string>

#include "launcher/job/attempt_listener.h"
#include "launcher/job/job_event_log.h"

namespace dlaunch::launcher {

class EventsListener : public AttemptListener {
 public:
  // `log` outlives the listener; `host`: this node's name, in every rank event.
  EventsListener(JobEventLog* log, std::string host) : log_(log), host_(std::move(host)) {}

  void OnAttemptStart(const Membership& m) override;
  void OnRankChange(const AttemptResult& now) override;
  void OnRanksGone(AttemptResult* result) override;
  void OnRestart(const Membership& next, const std::string& how,
                 const AttemptReport& ended) override;
  void OnJobEnd(const AttemptReport& last) override;

 private:
  // An event of `kind` about rank `r` of this node at `unix_ms`.
  rundir::JobEvent RankEvent(rundir::JobEventKind kind, const RankOutcome& r,
                             int64_t unix_ms) const;
  // The rank_start and rank_exit events of `now` not said yet.
  void EmitRankEvents(const AttemptResult& now);
  // restart_decision, when the restart policy weighed `ended`.
  void EmitDecision(const AttemptReport& ended);

  JobEventLog* log_;
  std::string host_;
  std::map<int, int> said_;  // rank -> 1 started, 2 exited, in this attempt
};

}  // namespace dlaunch::launcher
