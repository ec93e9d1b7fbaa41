#include "launcher/live/live_job.h"

#include "core/base/clock.h"
#include "core/run_dir/paths.h"
#include "launcher/python/agent_files.h"

namespace dlaunch::launcher {

core::RankStatus FromProto(const v1::RankStatus& s) {
  core::RankStatus r;
  r.step = s.step();
  r.phase = static_cast<core::Phase>(s.phase());
  r.last_started_seq = s.last_started_seq();
  r.last_completed_seq = s.last_completed_seq();
  r.current_op = s.current_op();
  r.rss_bytes = s.rss_bytes();
  r.peak_rss_bytes = s.peak_rss_bytes();
  r.device_allocated_bytes = s.device_allocated_bytes();
  r.device_reserved_bytes = s.device_reserved_bytes();
  r.device_peak_bytes = s.device_peak_bytes();
  r.loss = s.loss();
  r.samples_per_sec = s.samples_per_sec();
  r.steps_timed = s.steps_timed();
  r.step_busy_ms_total = s.step_busy_ms_total();
  r.arrivals_first_seq = s.arrivals_first_seq();
  r.arrival_unix_us.assign(s.arrival_unix_us().begin(), s.arrival_unix_us().end());
  return r;
}

LiveJobView::LiveJobView(CoordinatorHandler* coordinator, Supervisor* supervisor, int world_size,
                         std::string run_dir)
    : coordinator_(coordinator),
      supervisor_(supervisor),
      world_size_(world_size),
      run_dir_(std::move(run_dir)) {}

std::vector<RankLiveState> LiveJobView::Ranks() {
  std::vector<RankLiveState> ranks(world_size_);
  // Another node's rank is seen through its heartbeats only; without them (a program that does
  // not use libdlaunch) its output is not seen here, so it must not look silent.
  const int64_t now = base::UnixMillis();
  for (int r = 0; r < world_size_; ++r) {
    ranks[r].rank = r;
    ranks[r].last_output_unix_ms = now;
    ranks[r].remote = true;
  }
  std::vector<std::optional<python::AgentHeartbeat>> piped(world_size_);
  for (const auto& live : supervisor_->Live()) {
    if (live.rank < 0 || live.rank >= world_size_ || live.pid <= 0) continue;
    RankLiveState& s = ranks[live.rank];
    s.remote = false;
    s.pid = live.pid;
    s.last_output_unix_ms = live.last_output_unix_ms;
    s.exited = live.exited;
    s.failed = live.failed;
    piped[live.rank] = python::ParseAgentHeartbeat(live.agent_line);
  }
  // Other nodes' ranks that exited, as their agents said in this attempt, and their pipes.
  for (const NodeView& node : coordinator_->Nodes()) {
    if (!node.status) continue;
    for (const v1::RankExit& x : node.status->ranks()) {
      if (x.rank() < 0 || x.rank() >= world_size_ || !ranks[x.rank()].remote) continue;
      if (x.exited()) {
        ranks[x.rank()].exited = true;
        ranks[x.rank()].failed = x.exit_code() != 0 || x.signal() != 0;
      }
      // The heartbeats its agent could not write to a file, passed on by its node's agent.
      piped[x.rank()] = python::ParseAgentHeartbeat(x.agent_heartbeat());
    }
  }
  for (RankLiveState& s : ranks) {
    if (s.exited && s.remote) continue;
    // The agent's first heartbeat came down its pipe: without one, the rank has no agent.
    if (!piped[s.rank]) continue;
    agents_seen_ = true;
    // A Python rank reports through its agent's heartbeat file instead of a heartbeat stream;
    // another node's agent keeps node 0's copy of that file current. One that cannot write the
    // file sends the heartbeat through its pipe: the newer of the two counts.
    std::optional<python::AgentHeartbeat> beat = python::ReadAgentHeartbeat(RankDir(s.rank));
    std::optional<python::AgentHeartbeat>& sent = piped[s.rank];
    if (sent && (!beat || sent->unix_ms > beat->unix_ms)) beat = std::move(sent);
    if (beat) {
      s.heartbeat_write_error = beat->write_error;
      s.linked = s.runs_agent = true;
      s.status = beat->status;
      s.last_heartbeat_unix_ms = beat->unix_ms;
      s.last_progress_unix_ms = beat->progress_unix_ms;
      s.section = beat->section;
      s.section_since_unix_ms = beat->section_since_unix_ms;
      s.section_timeout_ms =
          beat->section_timeout_s < 0 ? -1 : static_cast<int64_t>(beat->section_timeout_s * 1000);
    }
  }
  for (const auto& view : coordinator_->Snapshot()) {
    if (view.rank < 0 || view.rank >= world_size_ || !view.status) continue;
    RankLiveState& s = ranks[view.rank];
    s.linked = true;
    s.status = FromProto(*view.status);
    s.last_heartbeat_unix_ms = view.last_heartbeat_unix_ms;
    s.last_progress_unix_ms = view.last_progress_unix_ms;
  }
  return ranks;
}

void LiveJobView::RequestDump(const std::string& reason) {
  v1::Command dump;
  dump.set_kind(v1::Command::DUMP);
  dump.set_reason(reason);
  coordinator_->Broadcast(dump);
  // Other nodes' agents pass it on to their Python ranks.
  coordinator_->BroadcastToNodes(dump);
  RequestRunningRankDumps(
      *supervisor_, [this](int rank) { return RankDir(rank); }, reason);
}

void RequestRunningRankDumps(const Supervisor& supervisor,
                             const std::function<std::string(int rank)>& dir_of,
                             const std::string& reason) {
  for (const auto& live : supervisor.Live()) {
    if (live.exited) continue;
    if (const std::string dir = dir_of(live.rank); !dir.empty()) {
      python::RequestAgentDump(dir, reason);
    }
  }
}

std::map<int, std::string> LiveJobView::RemoteStacks(const std::vector<int>& ranks,
                                                     std::chrono::milliseconds timeout) {
  std::map<int, std::string> states;
  if (coordinator_->config().nnodes <= 1) return states;
  std::lock_guard<std::mutex> lock(stacks_mu_);
  v1::Command stacks;
  stacks.set_kind(v1::Command::STACKS);
  stacks.set_id(++stacks_id_);
  for (int r : ranks) stacks.add_ranks(r);
  if (coordinator_->BroadcastToNodes(stacks) == 0) return states;
  const int id = stacks_id_;
  coordinator_->WaitForNodes(
      [id](const std::vector<NodeView>& nodes) {
        for (const NodeView& n : nodes) {
          if (n.node_rank == 0 || n.lost || !n.streaming) continue;
          if (!n.status || n.status->stacks_answered() < id) return false;
        }
        return true;
      },
      timeout);
  for (const NodeView& n : coordinator_->Nodes()) {
    if (!n.status || n.status->stacks_answered() < id) continue;
    for (const v1::RankProcess& p : n.status->processes()) states[p.rank()] = p.state();
  }
  return states;
}

std::optional<std::vector<rundir::StragglerVerdict>> LiveJobView::Stragglers() {
  std::lock_guard<std::mutex> lock(stragglers_mu_);
  return stragglers_;
}

void LiveJobView::SetStragglers(std::vector<rundir::StragglerVerdict> verdicts) {
  std::lock_guard<std::mutex> lock(stragglers_mu_);
  stragglers_ = std::move(verdicts);
}

std::string LiveJobView::RankDir(int rank) const {
  return rundir::RunDir(run_dir_).rank(rank).path();
}

}  // namespace dlaunch::launcher
