// Live straggler detection: which rank makes the others wait. Two measures, per rank, over a
// rolling window of the last N steps:
//   - its own step time, the time of a step less the time it spent waiting inside collectives
//     (in data-parallel training every rank's wall-clock step is the slowest rank's, so only the
//     time a rank is busy by itself tells them apart), as a p50, and that p50 relative to the
//     median of every rank's p50;
//   - how often it entered a collective last, from the start times of the same collective seq
//     across the ranks' flight recorders.
// A rank whose relative step time reaches the threshold is a straggler until it falls back under
// a lower one (hysteresis, so a rank near the line does not flap). Pure logic: the caller feeds it
// the ranks' counters and the clock; it never blocks and does no I/O.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "core/run_dir/straggler_verdicts.h"

namespace dlaunch::launcher {

struct StragglerOptions {
  // A rank whose step time p50 is this many times the median of all ranks' is a straggler.
  double threshold = 1.2;
  int64_t window_steps = 200;  // the rolling window
  // Fewest steps in a rank's window before it is judged: heartbeats carry several steps each, and
  // a verdict must come within a few dozen steps.
  int64_t min_steps = 20;
  // Nor before it holds this many heartbeats' intervals: a p50 of one or two intervals is their
  // mean, and one second in which a busy host left the rank without a core would name it.
  int64_t min_intervals = 3;
  // Nor is a rank a straggler while it is within this much of the median: at a step of a few
  // milliseconds, a busy machine's scheduling noise alone is tens of percent.
  double min_excess_ms = 5;
};

// One rank's figures now; -1 for what is not known yet.
struct StragglerScore {
  int rank = -1;
  std::string host;
  int64_t window_steps = 0;  // steps the step figures cover
  double step_ms_p50 = -1;
  double relative = -1;     // step_ms_p50 / the median of every judged rank's p50
  int64_t collectives = 0;  // collectives in the arrival window every rank entered
  double last_share = -1;   // share of those this rank entered last
};

class StragglerDetector {
 public:
  // Changes of Evaluate: a verdict that started, or one that ended (its end_* then set).
  struct Change {
    bool started = true;
    rundir::StragglerVerdict verdict;
  };

  StragglerDetector(int world_size, StragglerOptions options);

  // The host a verdict names the rank by.
  void SetHost(int rank, const std::string& host);
  // A rank's cumulative step counters, as its latest heartbeat has them: steps timed so far and
  // their busy milliseconds in all. Counters that go back (a restarted rank) start its window
  // afresh. Repeats of the same figures are ignored.
  void ObserveSteps(int rank, int64_t steps_timed, double busy_ms_total);
  // Start times (unix microseconds) of the collectives `first_seq`, `first_seq`+1, ... that the
  // rank entered (0 = unknown). Seqs already seen are ignored.
  void ObserveArrivals(int rank, int64_t first_seq, const std::vector<int64_t>& started_unix_us);
  // The job's step (the furthest rank's) for the verdicts' start_step/end_step.
  void SetJobStep(int64_t step) { job_step_ = step; }

  // Judges every rank now: returns the verdicts that started and ended since the last call.
  std::vector<Change> Evaluate(int64_t now_unix_ms);

  std::vector<StragglerScore> Scores() const;  // index == rank
  // Every verdict so far, in the order they started; end_unix_ms 0 while active.
  const std::vector<rundir::StragglerVerdict>& Verdicts() const { return verdicts_; }
  int ActiveCount() const;

  // Forgets the windows (a new attempt); verdicts so far are kept, active ones ended at `now`.
  void Reset(int64_t now_unix_ms);

  const StragglerOptions& options() const { return options_; }

 private:
  struct Interval {
    int64_t steps = 0;
    double ms_per_step = 0;
  };
  struct RankWindow {
    std::string host;
    int64_t last_steps = -1;
    double last_busy_ms = 0;
    std::deque<Interval> intervals;
    int64_t steps = 0;                    // sum of intervals' steps
    std::map<int64_t, int64_t> arrivals;  // seq -> start unix us, not yet judged
    int active = -1;                      // index into verdicts_ of its active verdict
  };

  void JudgeArrivals();
  double P50(const RankWindow& w) const;
  std::string Text(const rundir::StragglerVerdict& v, bool started) const;

  int world_size_;
  StragglerOptions options_;
  std::vector<RankWindow> ranks_;
  std::deque<int> last_arrivals_;  // the last rank of each judged collective, newest last
  int64_t judged_seq_ = -1;        // the highest collective seq judged
  int64_t job_step_ = -1;
  std::vector<rundir::StragglerVerdict> verdicts_;
};

}  // namespace dlaunch::launcher
