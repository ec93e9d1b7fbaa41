#include "launcher/diagnose/hang_monitor.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <tuple>

#include "core/base/files.h"
#include "core/base/format.h"
#include "core/error.h"
#include "core/run_dir/paths.h"
#include "core/run_dir/rank_logs.h"
#include "launcher/diagnose/analyzer.h"
#include "launcher/diagnose/diagnosis_writer.h"
#include "launcher/diagnose/run_snapshot.h"
#include "launcher/diagnose/stack_capture.h"
#include "launcher/diagnose/trace_writer.h"

namespace dlaunch::launcher {
namespace {

using base::FormatDurationMs;

constexpr auto kDumpPollInterval = std::chrono::milliseconds(20);
// Beyond one stack_timeout: another node's gdb runs, then its files travel.
constexpr auto kRemoteMargin = std::chrono::seconds(5);
// Of the ranks waiting in the stalled collective with their peers that did not answer the dump,
// this many have their stacks taken: at a thousand ranks, gdb on every one of them would hold
// the diagnosis for minutes, and their stacks all say the same.
constexpr size_t kPeerStacks = 8;

// The collective a rank is in or last entered: its last started seq, or the one after its last
// completed while it says it communicates.
int64_t InFlightSeq(const core::RankStatus& s) {
  return s.phase == core::Phase::kCommunication
             ? std::max(s.last_started_seq, s.last_completed_seq + 1)
             : s.last_started_seq;
}

// When a linked rank last moved: its own account where it gives one (the Python agent's
// progress_unix_ms counts the start of the call it is in, the coordinator's the heartbeat that
// showed the change), else when the monitor saw its seq or step change. A native rank on this
// host that is inside a collective moved last when it entered it: its heartbeat carries that
// start time (its newest arrival, by the same clock), while the status saying so reaches the
// launcher up to a heartbeat interval later. The start time is taken within `lateness_ms` of the
// seen time (the newest arrival is an older collective's when the rank is in a point-to-point
// call).
int64_t ProgressOf(int64_t seen_unix_ms, const RankLiveState& r, int64_t lateness_ms) {
  const int64_t seen = r.last_progress_unix_ms > 0 ? r.last_progress_unix_ms : seen_unix_ms;
  const core::RankStatus& s = r.status;
  if (r.runs_agent || r.remote || s.arrival_unix_us.empty() ||
      s.last_started_seq <= s.last_completed_seq) {
    return seen;
  }
  const int64_t entered = s.arrival_unix_us.back() / 1000;
  return entered > 0 ? std::min(seen, std::max(entered, seen - lateness_ms)) : seen;
}

// Every linked, living rank has sent a heartbeat at or after `since` (its status is at least that
// new), or is stopped and cannot move.
bool AllReportedSince(const std::vector<RankLiveState>& ranks, int64_t since) {
  for (const RankLiveState& r : ranks) {
    if (!r.linked || r.exited || r.last_heartbeat_unix_ms >= since) continue;
    const std::string state = r.pid > 0 ? ProcessState(r.pid) : "";
    if (state.empty() || state[0] != 'T') return false;
  }
  return true;
}

}  // namespace

HangMonitor::HangMonitor(JobView& job, Options options) : job_(job), options_(std::move(options)) {}

void HangMonitor::Reset() {
  tracks_.clear();
  stall_since_unix_ms_ = 0;
  fired_ = false;
}

std::string HangMonitor::FindStall(const std::vector<RankLiveState>& ranks, int64_t now) {
  std::string reason;
  auto add = [&](const std::string& why) {
    if (reason.empty()) reason = why;
  };
  const int64_t hang_ms = options_.hang_timeout.count();
  const int64_t heartbeat_ms = options_.heartbeat_timeout.count();
  bool in_section = false;                  // a rank declared a long section that has not run out
  int64_t newest_progress = 0;              // of any linked rank
  std::vector<const RankLiveState*> stuck;  // in a collective, no progress for hang_timeout
  for (const RankLiveState& r : ranks) {
    Track& t = tracks_[r.rank];
    if (t.first_seen_unix_ms == 0) {
      t.first_seen_unix_ms = now;
      t.progress_unix_ms = now;
      t.phase_since_unix_ms = now;
    }
    if (r.linked) {
      if (r.status.last_completed_seq != t.last_completed_seq || r.status.step != t.step) {
        t.last_completed_seq = r.status.last_completed_seq;
        t.step = r.status.step;
        t.progress_unix_ms = now;
      }
      if (r.status.phase != t.phase) {
        t.phase = r.status.phase;
        t.phase_since_unix_ms = now;
      }
    }
    if (r.exited) continue;
    const std::string who = "rank " + std::to_string(r.rank);
    if (r.linked) {
      // The Python agent's heartbeat thread needs the GIL, so a long call that holds it is not a
      // stall by itself; a native rank's heartbeat thread runs whatever the program does.
      if (!r.runs_agent && r.last_heartbeat_unix_ms > 0 &&
          now - r.last_heartbeat_unix_ms > heartbeat_ms) {
        add(who + ": no heartbeat for " + FormatDurationMs(now - r.last_heartbeat_unix_ms));
      }
      const int64_t progress = ProgressOf(t.progress_unix_ms, r, options_.stall_confirm.count());
      newest_progress = std::max(newest_progress, progress);
      // A native rank may report its phase before the seq of the collective it enters.
      const bool in_flight = r.status.last_started_seq > r.status.last_completed_seq ||
                             r.status.phase == core::Phase::kCommunication;
      if (in_flight && now - progress > hang_ms) stuck.push_back(&r);
      if (!r.section.empty()) {
        const int64_t limit = r.section_timeout_ms >= 0 ? r.section_timeout_ms : hang_ms;
        if (now - r.section_since_unix_ms <= limit) in_section = true;
      }
    } else if (options_.silence_is_hang) {
      int64_t last = std::max(t.first_seen_unix_ms, r.last_output_unix_ms);
      if (now - last > hang_ms) {
        add(who + ": no output and no exit for " + FormatDurationMs(now - last) +
            " (program not linked with libdlaunch; --hang-on-silence)");
      }
    }
  }
  if (in_section || stuck.empty() || !reason.empty()) {
    stall_since_unix_ms_ = 0;
    return reason;
  }
  // A collective in flight past the timeout is a hang when a peer is absent from it (never
  // entered, or gone) or when nothing moves anywhere; a rank outside any collective is not.
  for (const RankLiveState* r : stuck) {
    const int64_t seq = InFlightSeq(r->status);
    std::vector<int> absent;
    for (const RankLiveState& p : ranks) {
      if (p.rank == r->rank || !(p.linked || p.exited)) continue;
      if (p.exited || InFlightSeq(p.status) < seq) absent.push_back(p.rank);
    }
    const int64_t waited =
        now - ProgressOf(tracks_[r->rank].progress_unix_ms, *r, options_.stall_confirm.count());
    const std::string where = "rank " + std::to_string(r->rank) + ": no progress for " +
                              FormatDurationMs(waited) + " in collective #" + std::to_string(seq) +
                              (r->status.current_op.empty() ? "" : " " + r->status.current_op);
    if (!absent.empty()) {
      add(where + ", " + base::NameRanks(absent) + (absent.size() == 1 ? " has" : " have") +
          " not entered it");
    } else if (now - newest_progress > hang_ms) {
      add(where + ", and no rank made progress since");
    }
  }
  if (reason.empty()) {
    stall_since_unix_ms_ = 0;
    return reason;
  }
  if (stall_since_unix_ms_ == 0) stall_since_unix_ms_ = now;
  // The rule was judged from heartbeats up to one interval old: a peer may have entered the
  // collective since its last one. The stall counts once every rank has reported after the rule
  // first held and it still holds, or, for a rank that cannot report (holding the GIL), once it
  // has held for stall_confirm.
  if (now - stall_since_unix_ms_ < options_.stall_confirm.count() &&
      !AllReportedSince(ranks, stall_since_unix_ms_)) {
    return "";
  }
  return reason;
}

std::optional<Diagnosis> HangMonitor::Poll(int64_t now_unix_ms) {
  if (fired_) return std::nullopt;
  std::string reason = FindStall(job_.Ranks(), now_unix_ms);
  if (reason.empty()) return std::nullopt;
  return DiagnoseNow(now_unix_ms, reason);
}

Diagnosis HangMonitor::DiagnoseNow(int64_t now_unix_ms, const std::string& trigger) {
  fired_ = true;
  const std::string run_dir = job_.run_dir();
  const rundir::RunDir run(run_dir);
  std::vector<RankLiveState> ranks = job_.Ranks();

  // Ask for dumps and wait for every linked, living rank to replace its flight.json.
  std::map<int, std::tuple<int64_t, int64_t, int64_t>> before;
  for (const RankLiveState& r : ranks) {
    before[r.rank] = base::FileVersion(run.rank(r.rank).flight());
  }
  job_.RequestDump(trigger);
  std::map<int, bool> answered;
  // A rank whose heartbeat already stopped, or that is stopped, cannot answer: do not wait for it.
  std::map<int, bool> hopeless;
  for (const RankLiveState& r : ranks) {
    const std::string state = r.exited || r.remote ? "" : ProcessState(r.pid);
    hopeless[r.rank] = (!state.empty() && (state[0] == 'T' || state[0] == 'Z')) ||
                       (r.last_heartbeat_unix_ms > 0 && now_unix_ms - r.last_heartbeat_unix_ms >
                                                            options_.heartbeat_timeout.count());
  }
  const auto deadline = std::chrono::steady_clock::now() + options_.dump_wait;
  while (true) {
    bool all = true;
    for (const RankLiveState& r : ranks) {
      if (!r.linked || r.exited || answered[r.rank]) continue;
      if (hopeless[r.rank]) {
        // Still take a late answer, but do not hold the loop open for it.
        answered[r.rank] = base::FileVersion(run.rank(r.rank).flight()) != before[r.rank];
        continue;
      }
      if (base::FileVersion(run.rank(r.rank).flight()) != before[r.rank]) {
        answered[r.rank] = true;
      } else {
        all = false;
      }
    }
    if (all || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(kDumpPollInterval);
  }

  // Stacks of this node's silent ones, in parallel so the call stays bounded by one
  // stack_timeout; other nodes' agents take theirs and push every file.
  std::vector<StackTarget> targets;
  std::vector<int> remote_silent;
  // The suspects: a rank that is silent, not linked, or behind the furthest collective in
  // flight. Every suspect's stack is taken; of the others, kPeerStacks.
  int64_t furthest = -1;
  for (const RankLiveState& r : ranks)
    if (r.linked && !r.exited) furthest = std::max(furthest, InFlightSeq(r.status));
  size_t peers = 0;
  for (const RankLiveState& r : ranks) {
    if (r.exited || (r.linked && answered[r.rank])) continue;
    const bool suspect = !r.linked || hopeless[r.rank] || InFlightSeq(r.status) < furthest;
    if (!suspect && peers++ >= kPeerStacks) continue;
    if (r.remote) {
      remote_silent.push_back(r.rank);
    } else if (r.pid > 0) {
      // A stopped Python rank's native stack only shows the stop, and gdb takes seconds to load
      // torch's symbols: its process state says it all.
      if (r.runs_agent && hopeless[r.rank] && ProcessState(r.pid).rfind("T", 0) == 0) continue;
      targets.push_back({r.rank, r.pid, run.rank(r.rank).stacks()});
    }
  }
  std::map<int, std::string> process_state;
  std::vector<std::string> write_problems;
  auto remote = std::async(std::launch::async, [&] {
    return job_.RemoteStacks(remote_silent, options_.stack_timeout + kRemoteMargin);
  });
  for (const StackResult& r :
       CaptureStacksInto(targets, options_.stack_timeout, options_.stack_tool)) {
    process_state[r.rank] = r.process_state;
    if (!r.problem.empty()) write_problems.push_back(r.problem);
  }
  for (const auto& [rank, state] : remote.get()) process_state[rank] = state;
  // A remote rank's answer may have arrived with its node's last push.
  for (const RankLiveState& r : ranks) {
    if (r.remote && r.linked && !answered[r.rank]) {
      answered[r.rank] = base::FileVersion(run.rank(r.rank).flight()) != before[r.rank];
    }
  }

  RunSnapshot snapshot;
  try {
    snapshot = LoadRunDirForLauncher(run_dir, static_cast<int>(ranks.size()));
  } catch (const Error& e) {
    snapshot.run_dir = run_dir;
    snapshot.problems.push_back(e.what());
    snapshot.world_size = static_cast<int>(ranks.size());
    snapshot.ranks.resize(ranks.size());
    for (size_t i = 0; i < ranks.size(); ++i) snapshot.ranks[i].rank = static_cast<int>(i);
  }
  for (const RankLiveState& r : ranks) {
    if (r.rank < 0 || r.rank >= static_cast<int>(snapshot.ranks.size())) continue;
    RankRecord& rec = snapshot.ranks[r.rank];
    rec.live = r;
    rec.answered_dump = answered[r.rank];
    auto track = tracks_.find(r.rank);
    if (track != tracks_.end()) rec.live_phase_since_unix_ms = track->second.phase_since_unix_ms;
    auto state = process_state.find(r.rank);
    rec.process_state = state != process_state.end()
                            ? state->second
                            : (r.exited || r.remote ? "" : ProcessState(r.pid));
    if (!r.linked && r.last_output_unix_ms == 0 && track != tracks_.end()) {
      rec.live->last_output_unix_ms = track->second.first_seen_unix_ms;
    }
  }
  for (std::string& p : write_problems) snapshot.problems.push_back(std::move(p));
  // While the job runs the launcher has not written summary.json yet: that is not a gap.
  const std::string no_summary = rundir::FileName(run.summary()) + " missing";
  snapshot.problems.erase(
      std::remove_if(snapshot.problems.begin(), snapshot.problems.end(),
                     [&](const std::string& p) { return p.rfind(no_summary, 0) == 0; }),
      snapshot.problems.end());

  if (auto stragglers = job_.Stragglers()) snapshot.stragglers = std::move(*stragglers);

  AnalyzeOptions options;
  options.now_unix_ms = now_unix_ms;
  options.trigger = trigger;
  options.hang_suspected = true;
  Diagnosis diagnosis = Analyze(snapshot, options);
  if (options_.write_files) WriteReportFiles(snapshot, &diagnosis, run_dir);
  return diagnosis;
}

}  // namespace dlaunch::launcher
