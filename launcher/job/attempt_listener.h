// The agent loop's side duties, each an attempt listener of its own (the events file, summary.json,
// the agent watch, torchrun's file timer, the leftovers sweep): the loop rendezvouses, starts,
// monitors and restarts ranks, and tells its listeners what happened, as torchelastic's agent
// tells its event handlers. A new duty is one listener, not a line inside the loop.
#pragma once

#include <string>
#include <vector>

#include "launcher/job/job_plan.h"
#include "launcher/job/node_roles.h"
#include "launcher/supervision/process_spawner.h"
#include "launcher/supervision/supervisor.h"

namespace dlaunch::launcher {

class AttemptListener {
 public:
  virtual ~AttemptListener() = default;

  // Before an attempt's ranks start, with that attempt's membership.
  virtual void OnAttemptStart(const Membership& m) {}
  // Each rank's process before it starts: the variables this duty's ranks need.
  virtual void OnRankProcess(ProcessSpec* process) {}
  // A rank started or exited; `now` is the attempt as it stands. On the supervisor's thread.
  virtual void OnRankChange(const AttemptResult& now) {}
  // Every tick of the supervisor's loop while the attempt runs. Must not block for long.
  virtual void OnTick() {}
  // The attempt's ranks are gone, before it is judged; may add to what `result` says.
  virtual void OnRanksGone(AttemptResult* result) {}
  // The next attempt was decided (`how`: "restart", "scale up", ...) after `ended`.
  virtual void OnRestart(const Membership& next, const std::string& how,
                         const AttemptReport& ended) {}
  // No attempt follows `last` (success, a failure past --max-restarts, the restart policy's stop,
  // a signal during the node rendezvous).
  virtual void OnJobEnd(const AttemptReport& last) {}
};

// The listeners of one job, told in the order they were added. Not thread-safe itself: the loop
// and the supervisor's callbacks take turns.
class AttemptListeners {
 public:
  void Add(AttemptListener* listener) { listeners_.push_back(listener); }

  void AttemptStart(const Membership& m);
  void RankProcess(ProcessSpec* process);
  void RankChange(const AttemptResult& now);
  void Tick();
  void RanksGone(AttemptResult* result);
  void Restart(const Membership& next, const std::string& how, const AttemptReport& ended);
  void JobEnd(const AttemptReport& last);

 private:
  std::vector<AttemptListener*> listeners_;
};

}  // namespace dlaunch::launcher
