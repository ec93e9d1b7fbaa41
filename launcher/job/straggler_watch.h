// Node 0's live straggler detection: the ranks' heartbeats (native streams and the Python agents'
// heartbeat files, other nodes' pushed to node 0) fed into the StragglerDetector on the
// supervisor's tick, verdicts said on stderr once when they start and once when they end.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "launcher/diagnose/job_view.h"
#include "launcher/rendezvous/coordinator.h"
#include "launcher/straggler/straggler_detector.h"

namespace dlaunch::launcher {

class StragglerWatch {
 public:
  // `view` and `coordinator` outlive the watch. `on_change` (may be empty) hears every verdict
  // that starts or ends, after it was printed.
  StragglerWatch(JobView* view, CoordinatorHandler* coordinator, int world_size,
                 std::string local_host, StragglerOptions options,
                 std::function<void(const StragglerDetector::Change&)> on_change);

  // On the supervisor's tick; reads the ranks at most every kPollEvery. Non-blocking but for one
  // Ranks() snapshot (which reads the Python ranks' heartbeat files, ~50 us each).
  void Poll(int64_t now_unix_ms);
  // A new attempt: the windows start afresh, verdicts so far stay.
  void Reset(int64_t now_unix_ms) { detector_.Reset(now_unix_ms); }

  const StragglerDetector& detector() const { return detector_; }
  // Bumped whenever a verdict starts or ends: summary.json is rewritten when it moves.
  int generation() const { return generation_; }

 private:
  JobView* view_;
  CoordinatorHandler* coordinator_;
  std::string local_host_;
  StragglerDetector detector_;
  std::function<void(const StragglerDetector::Change&)> on_change_;
  int64_t last_poll_unix_ms_ = 0;
  int generation_ = 0;
};

}  // namespace dlaunch::launcher
