#include "launcher/live/live_status.h"

#include <algorithm>

#include "core/runtime.h"
#include "launcher/live/metrics_text.h"

namespace dlaunch::launcher {
namespace {

double AgeS(int64_t now, int64_t since) {
  return since > 0 ? std::max<int64_t>(0, now - since) / 1000.0 : -1;
}

// The share of its steps a rank spent waiting in collectives between two heartbeats: a step's
// wall time (the heartbeats' distance over the steps between them) less its own busy time.
void UpdateCommShare(const RankLiveState& r, LiveStatus::Track* t) {
  const int64_t steps = r.status.steps_timed;
  const int64_t beat = r.last_heartbeat_unix_ms;
  if (steps <= 0 || beat <= 0) return;
  if (t->steps_timed < 0 || steps < t->steps_timed) {  // first sight, or a restarted rank
    t->steps_timed = steps;
    t->busy_ms = r.status.step_busy_ms_total;
    t->beat_ms = beat;
    return;
  }
  const int64_t d_steps = steps - t->steps_timed;
  const int64_t d_ms = beat - t->beat_ms;
  if (d_steps <= 0 || d_ms <= 0) return;
  const double wall = static_cast<double>(d_ms);
  const double busy = r.status.step_busy_ms_total - t->busy_ms;
  t->comm_share = std::clamp(1.0 - busy / wall, 0.0, 1.0);
  t->steps_timed = steps;
  t->busy_ms = r.status.step_busy_ms_total;
  t->beat_ms = beat;
}

}  // namespace

LiveSnapshot LiveStatus::Build(const std::vector<RankLiveState>& ranks,
                               const std::vector<NodeView>& nodes, const LiveJobFacts& facts,
                               int64_t now, std::map<int, Track>* tracks) {
  LiveSnapshot s;
  LiveJob& j = s.job;
  j.run_id = facts.run_id;
  j.run_dir = facts.run_dir;
  j.attempt = facts.attempt;
  j.restarts = facts.restarts;
  j.world_size = facts.world_size;
  j.nodes = facts.nodes;
  j.start_unix_ms = facts.start_unix_ms;
  j.unix_ms = now;
  j.stragglers = facts.stragglers;
  // Other nodes' ranks: their host and pid as their agents report them.
  std::map<int, std::pair<std::string, int>> remote;
  for (const NodeView& n : nodes) {
    if (!n.status) continue;
    for (const v1::RankExit& x : n.status->ranks()) remote[x.rank()] = {n.host, x.pid()};
  }
  bool any_beat = false;
  int failed_rank = -1;  // the first rank that exited with a failure
  for (const RankLiveState& r : ranks) {
    LiveRank x;
    x.rank = r.rank;
    x.remote = r.remote;
    x.python = r.runs_agent;
    x.pid = r.pid;
    x.host = r.remote ? "" : facts.local_host;
    if (auto it = remote.find(r.rank); r.remote && it != remote.end()) {
      x.host = it->second.first;
      x.pid = it->second.second;
    }
    Track& t = (*tracks)[r.rank];
    if (r.exited) {
      x.state = r.failed ? "failed" : "exited";
      failed_rank = failed_rank < 0 && r.failed ? r.rank : failed_rank;
    } else if (r.linked) {
      x.state = "running";
    } else {
      x.state = r.remote ? "unknown" : "starting";
    }
    if (r.linked) {
      any_beat = true;
      const core::RankStatus& st = r.status;
      if (st.step != t.step) {
        t.step = st.step;
        t.step_since_ms =
            t.step_since_ms == 0 && r.last_progress_unix_ms > 0 ? r.last_progress_unix_ms : now;
      }
      x.step = st.step;
      x.step_age_s = AgeS(now, t.step_since_ms);
      x.phase = core::PhaseName(st.phase);
      if (st.last_started_seq != t.started_seq) {
        t.started_seq = st.last_started_seq;
        t.started_since_ms = now;
      }
      if (st.last_started_seq >= 0 && st.last_started_seq > st.last_completed_seq) {
        x.collective_op = st.current_op.empty() ? "collective" : st.current_op;
        x.collective_seq = st.last_started_seq;
        x.collective_age_s = AgeS(now, t.started_since_ms);
      }
      x.collectives_completed = st.last_completed_seq >= 0 ? st.last_completed_seq + 1 : 0;
      x.heartbeat_age_s = AgeS(now, r.last_heartbeat_unix_ms);
      x.rss_bytes = st.rss_bytes;
      x.cuda_allocated_bytes = st.device_allocated_bytes;
      x.cuda_reserved_bytes = st.device_reserved_bytes;
      x.cuda_peak_bytes = st.device_peak_bytes;
      x.samples_per_s = st.samples_per_sec > 0 ? st.samples_per_sec : -1;
      UpdateCommShare(r, &t);
      x.comm_share = t.comm_share;
    }
    if (r.rank >= 0 && r.rank < static_cast<int>(facts.scores.size())) {
      const StragglerScore& sc = facts.scores[r.rank];
      x.step_time_p50_s = sc.step_ms_p50 >= 0 ? sc.step_ms_p50 / 1000.0 : -1;
      x.straggler_score = sc.relative;
      x.last_share = sc.last_share;
    }
    for (const auto& v : facts.stragglers) {
      if (v.rank == r.rank && v.end_unix_ms == 0) x.straggler = true;
    }
    s.ranks.push_back(std::move(x));
  }
  if (!facts.hang.empty()) {
    j.state = "hang";
    j.reason = facts.hang;
  } else if (!facts.failure.empty()) {
    j.state = "failed";
    j.reason = facts.failure;
  } else if (failed_rank >= 0) {
    j.state = "failed";
    j.reason = "rank " + std::to_string(failed_rank) + " failed";
  } else {
    j.state = any_beat ? "running" : "starting";
  }
  return s;
}

void LiveStatus::Update(const std::vector<RankLiveState>& ranks, const std::vector<NodeView>& nodes,
                        const LiveJobFacts& facts, int64_t now_unix_ms) {
  const LiveSnapshot s = Build(ranks, nodes, facts, now_unix_ms, &tracks_);
  std::string json = StatusToJson(s).dump();
  std::string metrics = RenderMetrics(s);
  std::lock_guard<std::mutex> lock(mu_);
  json_ = std::move(json);
  metrics_ = std::move(metrics);
  healthy_ = s.job.healthy();
  updated_ = true;
}

void LiveStatus::Reset() { tracks_.clear(); }

std::string LiveStatus::Json() const {
  std::lock_guard<std::mutex> lock(mu_);
  return json_;
}

std::string LiveStatus::Metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_;
}

bool LiveStatus::Healthy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return healthy_;
}

bool LiveStatus::updated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return updated_;
}

}  // namespace dlaunch::launcher
