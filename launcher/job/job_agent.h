// The loop every node runs, torchrun's agent in shape: attempt -> monitor -> restart, with the
// node role doing what differs between nodes and the plan deciding what each attempt runs.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/job/attempt_listener.h"
#include "launcher/job/job_event_log.h"
#include "launcher/job/job_plan.h"
#include "launcher/job/node_roles.h"
#include "launcher/job/summary_listener.h"
#include "launcher/supervision/interrupt_watch.h"
#include "launcher/supervision/placement.h"
#include "launcher/supervision/process_spawner.h"

namespace dlaunch::launcher {

class JobAgent {
 public:
  // `role` has been prepared (its identity is the plan's) and outlives the agent. The plan's
  // membership changes from attempt to attempt. `placement`: each local rank's GPU and CPUs
  // (none: inherited).
  JobAgent(JobPlan plan, NodeRole* role, std::string host,
           std::vector<RankPlacement> placement = {});

  // Blocks until the last attempt ended; returns dlaunch's exit code. Throws Error when a rank
  // cannot be started. `watch` (may be null) takes the job-ending signals while no attempt runs:
  // Run stops it before each attempt and starts it again for the node rendezvous after.
  int Run(ProcessSpawner* spawner, InterruptWatch* watch = nullptr);

 private:
  // The role's Open (node 0 of several waits for the first node rendezvous round): the exit code
  // when the job ends there, nullopt when its first attempt may start.
  std::optional<int> Open(Supervisor* supervisor, InterruptWatch* watch);
  // The listeners this job's options and program ask for, besides summary.json: torchrun's file
  // timer, the leftovers sweep, the agent watch, --events-file (opened here, on node 0).
  std::vector<std::unique_ptr<AttemptListener>> SideDuties(const Supervisor* supervisor);
  // "dlaunch: 4 ranks on 2 nodes (this is node 0), attempt 1, run directory ..." on stderr.
  void Announce() const;
  // One attempt: this node's ranks started, watched until they are gone, the listeners told.
  AttemptResult RunAttempt(Supervisor* supervisor, AttemptListeners* listeners,
                           const Membership& m);
  // What rank `slot` runs in the attempt of `m`: argv, environment, placement, process shape.
  // Clears what an earlier attempt left in its folder (RankProgram::BeforeAttempt).
  RankSpec RankSpecOf(const RankSlot& slot, const Membership& m, AttemptListeners* listeners) const;
  // The role's decision (and the node rendezvous) after the attempt of `m`: true when another
  // attempt runs, with the plan changed for it; false when the job is over, its summary written.
  bool NextAttempt(const Membership& m, InterruptWatch* watch, AttemptReport* report,
                   SummaryListener* summary, AttemptListeners* listeners);

  // The job ended before its first attempt (the role's `ended`, or a signal): the summary, then
  // the role's Close. Returns the exit code.
  int EndBeforeStart(const AttemptReport& report);

  // The attempt's verdict on this node; prints its root cause or stop reason.
  AttemptReport Judge(int attempt, AttemptResult result);

  JobPlan plan_;
  NodeRole* role_;
  std::string host_;
  std::vector<RankPlacement> placement_;
  std::unique_ptr<JobEventLog> events_;  // --events-file, on node 0
};

// Creates --log-dir, the run directory and this node's rank directories; what an earlier run with
// the same run id left there is put away into an attempt folder first (docs/run-directory.md).
// Returns the plan with its first attempt's folder name. Throws UsageError naming the folder
// that cannot be used.
JobPlan CreateRunDirectories(JobPlan plan);

}  // namespace dlaunch::launcher
