// summary.json through the job: rewritten on every rank change while an attempt runs and when
// node 0's straggler verdicts change, then at each attempt's end and the job's, one record per
// attempt (report.h's SummaryWriter does the writing).
#pragma once

#include <string>
#include <vector>

#include "launcher/job/attempt_listener.h"
#include "launcher/job/report.h"

namespace dlaunch::launcher {

class SummaryListener : public AttemptListener {
 public:
  // `plan` and `role` outlive the listener. Reserves room beside summary.json (SummaryWriter).
  SummaryListener(const JobPlan* plan, NodeRole* role, const std::string& host);

  // A new attempt record, started now.
  void OnAttemptStart(const Membership& m) override;
  void OnRankChange(const AttemptResult& now) override;
  // The summary is rewritten when the role's straggler verdicts changed.
  void OnTick() override;
  void OnRanksGone(AttemptResult* result) override;
  void OnRestart(const Membership& next, const std::string& how,
                 const AttemptReport& ended) override;

  // What the role adds at the attempt's end (NodeRole::Conclude): the other nodes.
  SummaryInfo* info() { return &info_; }
  // The attempt's end: its record and the job's verdict as `report` says, written; the report
  // gets where it went. Blocks for the write and its fsync; never throws.
  void EndAttempt(AttemptReport* report);
  // The job's end: the verdict as the last decision left it (an interrupted rendezvous), and the
  // restart policy's decision, written.
  void OnJobEnd(const AttemptReport& last) override;
  // The record of the attempt that runs or just ended: its folder once it is put away.
  AttemptRecord* current() { return &info_.attempts.back(); }
  const std::vector<AttemptRecord>& attempts() const { return info_.attempts; }

 private:
  const JobPlan* plan_;
  NodeRole* role_;
  SummaryInfo info_;
  SummaryWriter file_;
  int restarts_ = 0;        // the running attempt's restart count
  AttemptResult progress_;  // the ranks as they last stood
  int straggler_generation_ = -1;
};

}  // namespace dlaunch::launcher
