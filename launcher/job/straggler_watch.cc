#include "launcher/job/straggler_watch.h"

#include <algorithm>
#include <iostream>

namespace dlaunch::launcher {
namespace {

// Heartbeats come every 200 ms (Python) to 1 s (native): reading the ranks more often finds
// nothing new.
constexpr int64_t kPollEveryMs = 200;

}  // namespace

StragglerWatch::StragglerWatch(JobView* view, CoordinatorHandler* coordinator, int world_size,
                               std::string local_host, StragglerOptions options,
                               std::function<void(const StragglerDetector::Change&)> on_change)
    : view_(view),
      coordinator_(coordinator),
      local_host_(std::move(local_host)),
      detector_(world_size, options),
      on_change_(std::move(on_change)) {}

void StragglerWatch::Poll(int64_t now_unix_ms) {
  if (now_unix_ms - last_poll_unix_ms_ < kPollEveryMs) return;
  last_poll_unix_ms_ = now_unix_ms;
  const std::vector<RankLiveState> ranks = view_->Ranks();
  for (const NodeView& node : coordinator_->Nodes()) {
    if (!node.status) continue;
    for (const v1::RankExit& x : node.status->ranks()) detector_.SetHost(x.rank(), node.host);
  }
  int64_t job_step = -1;
  for (const RankLiveState& r : ranks) {
    if (!r.remote) detector_.SetHost(r.rank, local_host_);
    if (!r.linked) continue;
    job_step = std::max(job_step, r.status.step);
    detector_.ObserveSteps(r.rank, r.status.steps_timed, r.status.step_busy_ms_total);
    detector_.ObserveArrivals(r.rank, r.status.arrivals_first_seq, r.status.arrival_unix_us);
  }
  detector_.SetJobStep(job_step);
  for (const StragglerDetector::Change& c : detector_.Evaluate(now_unix_ms)) {
    ++generation_;
    std::cerr << "dlaunch: " << c.verdict.text << std::endl;
    if (on_change_) on_change_(c);
  }
}

}  // namespace dlaunch::launcher
