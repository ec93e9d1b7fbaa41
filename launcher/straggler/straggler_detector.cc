#include "launcher/straggler/straggler_detector.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dlaunch::launcher {
namespace {

// Arrivals kept per rank while waiting for the slowest reporter; older ones are dropped unjudged.
constexpr size_t kMaxPendingArrivals = 4096;

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

StragglerDetector::StragglerDetector(int world_size, StragglerOptions options)
    : world_size_(std::max(world_size, 0)), options_(options), ranks_(world_size_) {}

void StragglerDetector::SetHost(int rank, const std::string& host) {
  if (rank >= 0 && rank < world_size_) ranks_[rank].host = host;
}

void StragglerDetector::ObserveSteps(int rank, int64_t steps_timed, double busy_ms_total) {
  if (rank < 0 || rank >= world_size_ || steps_timed < 0) return;
  RankWindow& w = ranks_[rank];
  if (steps_timed < w.last_steps || busy_ms_total < w.last_busy_ms) {
    w.intervals.clear();
    w.steps = 0;
    w.last_steps = -1;
  }
  if (w.last_steps < 0) {
    // The first figures of a rank: a baseline. What came before (start-up, compilation, the
    // first steps) says nothing about its pace now.
    w.last_steps = steps_timed;
    w.last_busy_ms = busy_ms_total;
    return;
  }
  const int64_t steps = steps_timed - w.last_steps;
  if (steps <= 0) return;
  w.intervals.push_back({steps, (busy_ms_total - w.last_busy_ms) / static_cast<double>(steps)});
  w.steps += steps;
  w.last_steps = steps_timed;
  w.last_busy_ms = busy_ms_total;
  // Whole intervals leave the window, as long as what stays still fills it and is enough to judge.
  while (static_cast<int64_t>(w.intervals.size()) > options_.min_intervals &&
         w.steps - w.intervals.front().steps >= options_.window_steps) {
    w.steps -= w.intervals.front().steps;
    w.intervals.pop_front();
  }
}

void StragglerDetector::ObserveArrivals(int rank, int64_t first_seq,
                                        const std::vector<int64_t>& started_unix_us) {
  if (rank < 0 || rank >= world_size_ || first_seq < 0) return;
  RankWindow& w = ranks_[rank];
  for (size_t i = 0; i < started_unix_us.size(); ++i) {
    const int64_t seq = first_seq + static_cast<int64_t>(i);
    if (seq <= judged_seq_ || started_unix_us[i] <= 0) continue;
    w.arrivals.emplace(seq, started_unix_us[i]);
  }
  while (w.arrivals.size() > kMaxPendingArrivals) w.arrivals.erase(w.arrivals.begin());
}

void StragglerDetector::JudgeArrivals() {
  if (world_size_ < 2) return;
  // A seq is judged once every rank reported its start; seqs are judged in order, so one that a
  // rank never reports (its recorder's ring moved past it) is passed by once a later one is whole.
  int64_t whole = -1;
  {
    int64_t lowest_newest = INT64_MAX;
    for (const RankWindow& w : ranks_) {
      if (w.arrivals.empty()) return;
      lowest_newest = std::min(lowest_newest, w.arrivals.rbegin()->first);
    }
    whole = lowest_newest;
  }
  for (int64_t seq = judged_seq_ + 1; seq <= whole; ++seq) {
    int last = -1;
    int64_t last_us = -1;
    bool everyone = true;
    for (int r = 0; r < world_size_ && everyone; ++r) {
      auto it = ranks_[r].arrivals.find(seq);
      if (it == ranks_[r].arrivals.end()) {
        everyone = false;
      } else if (it->second > last_us) {
        last_us = it->second;
        last = r;
      }
    }
    if (!everyone) continue;
    last_arrivals_.push_back(last);
    while (static_cast<int64_t>(last_arrivals_.size()) > options_.window_steps) {
      last_arrivals_.pop_front();
    }
  }
  judged_seq_ = std::max(judged_seq_, whole);
  for (RankWindow& w : ranks_) {
    w.arrivals.erase(w.arrivals.begin(), w.arrivals.upper_bound(judged_seq_));
  }
}

double StragglerDetector::P50(const RankWindow& w) const {
  if (w.steps < std::max<int64_t>(options_.min_steps, 1) ||
      static_cast<int64_t>(w.intervals.size()) < options_.min_intervals) {
    return -1;
  }
  // The median step: intervals weighted by their steps (each heartbeat's mean stands for each of
  // its steps).
  std::vector<Interval> sorted(w.intervals.begin(), w.intervals.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const Interval& a, const Interval& b) { return a.ms_per_step < b.ms_per_step; });
  int64_t seen = 0;
  for (const Interval& i : sorted) {
    seen += i.steps;
    if (2 * seen >= w.steps) return i.ms_per_step;
  }
  return sorted.empty() ? -1 : sorted.back().ms_per_step;
}

std::vector<StragglerScore> StragglerDetector::Scores() const {
  std::vector<StragglerScore> out(world_size_);
  std::vector<double> p50(world_size_, -1);
  for (int r = 0; r < world_size_; ++r) {
    out[r].rank = r;
    out[r].host = ranks_[r].host;
    out[r].window_steps = ranks_[r].steps;
    out[r].step_ms_p50 = p50[r] = P50(ranks_[r]);
  }
  // Relative to the median of the other ranks: with two ranks that is the other one, where the
  // median of both would cap any rank's score below 2.
  for (int r = 0; r < world_size_; ++r) {
    if (p50[r] < 0) continue;
    std::vector<double> others;
    for (int o = 0; o < world_size_; ++o) {
      if (o != r && p50[o] >= 0) others.push_back(p50[o]);
    }
    const double median = Median(others);
    if (median > 0) out[r].relative = p50[r] / median;
  }
  if (!last_arrivals_.empty()) {
    std::vector<int64_t> last(world_size_, 0);
    for (int r : last_arrivals_) ++last[r];
    for (int r = 0; r < world_size_; ++r) {
      out[r].collectives = static_cast<int64_t>(last_arrivals_.size());
      out[r].last_share = static_cast<double>(last[r]) / last_arrivals_.size();
    }
  }
  return out;
}

int StragglerDetector::ActiveCount() const {
  int n = 0;
  for (const RankWindow& w : ranks_) n += w.active >= 0;
  return n;
}

std::string StragglerDetector::Text(const rundir::StragglerVerdict& v, bool started) const {
  std::string who = "rank " + std::to_string(v.rank);
  if (!v.host.empty()) who += " (host " + v.host + ")";
  char figures[160];
  std::snprintf(figures, sizeof figures, "%.2fx the median step time over the last %lld steps",
                v.relative, static_cast<long long>(v.window_steps));
  std::string text = started ? "straggler: " + who + " " + figures
                             : "straggler ended: " + who + " back to " + figures;
  if (v.last_share >= 0) {
    text += "; last to enter " + std::to_string(static_cast<int>(std::lround(v.last_share * 100))) +
            "% of collectives";
  }
  return text;
}

std::vector<StragglerDetector::Change> StragglerDetector::Evaluate(int64_t now_unix_ms) {
  JudgeArrivals();
  std::vector<Change> changes;
  const std::vector<StragglerScore> scores = Scores();
  // Back under the midpoint between 1 and the threshold ends a verdict.
  const double end_below = 1 + (options_.threshold - 1) / 2;
  for (int r = 0; r < world_size_; ++r) {
    const StragglerScore& s = scores[r];
    if (s.relative < 0) continue;
    const double median = s.step_ms_p50 / s.relative;
    const double excess = s.step_ms_p50 - median;
    RankWindow& w = ranks_[r];
    rundir::StragglerVerdict now;
    now.rank = r;
    now.host = w.host;
    now.relative = s.relative;
    now.step_ms_p50 = s.step_ms_p50;
    now.median_ms = median;
    now.window_steps = s.window_steps;
    now.last_share = s.last_share;
    if (w.active < 0) {
      if (s.relative < options_.threshold || excess < options_.min_excess_ms) continue;
      now.start_unix_ms = now_unix_ms;
      now.start_step = job_step_;
      now.text = Text(now, true);
      w.active = static_cast<int>(verdicts_.size());
      verdicts_.push_back(now);
      changes.push_back({true, now});
    } else if (s.relative < end_below || excess < options_.min_excess_ms / 2) {
      rundir::StragglerVerdict& v = verdicts_[w.active];
      v.end_unix_ms = now_unix_ms;
      v.end_step = job_step_;
      w.active = -1;
      Change ended{false, v};
      // What it ended on, worded from the figures now; the verdict keeps those it started with.
      ended.verdict.relative = now.relative;
      ended.verdict.last_share = now.last_share;
      ended.verdict.window_steps = now.window_steps;
      ended.verdict.text = Text(ended.verdict, false);
      changes.push_back(std::move(ended));
    }
  }
  return changes;
}

void StragglerDetector::Reset(int64_t now_unix_ms) {
  for (RankWindow& w : ranks_) {
    if (w.active >= 0) {
      verdicts_[w.active].end_unix_ms = now_unix_ms;
      verdicts_[w.active].end_step = job_step_;
    }
    const std::string host = w.host;
    w = RankWindow{};
    w.host = host;
  }
  last_arrivals_.clear();
  judged_seq_ = -1;
  job_step_ = -1;
}

}  // namespace dlaunch::launcher
