#include "launcher/diagnose/live_dump.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "core/base/clock.h"
#include "core/base/files.h"
#include "core/base/format.h"
#include "core/error.h"
#include "core/run_dir/diagnosis_file.h"
#include "core/run_dir/paths.h"
#include "launcher/diagnose/analyzer.h"
#include "launcher/diagnose/diagnosis_writer.h"
#include "launcher/diagnose/run_snapshot.h"
#include "launcher/diagnose/stack_capture.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;
using base::FormatDurationMs;
using base::NameRanks;

constexpr auto kPollInterval = std::chrono::milliseconds(20);
// Beyond one stack_timeout: another node's stack tool runs, then its files travel.
constexpr auto kRemoteMargin = std::chrono::seconds(5);
// Beyond dump_wait for another node's ranks: the DUMP's trip there and the push tick back.
constexpr auto kRemoteTrip = std::chrono::seconds(1);
// In one collective this long without progress: named as the rank the others wait for. Healthy
// ranks pass through a collective in milliseconds; a step's compute is not spent inside one.
constexpr int64_t kStuckMs = 2000;

// A rank's files that a dump keeps: its flight recorder, heartbeat and Python stacks.
constexpr const char* kRankFiles[] = {"flight.json", "flight_tail.jsonl", "heartbeat.json",
                                      "py_stacks.txt", "error.json"};

bool InFlight(const core::RankStatus& s) {
  return s.last_started_seq > s.last_completed_seq || s.phase == core::Phase::kCommunication;
}

// The collective a rank is in, or the last one it completed.
int64_t Position(const core::RankStatus& s) {
  return InFlight(s) ? std::max(s.last_started_seq, s.last_completed_seq + 1)
                     : s.last_completed_seq;
}

std::string SeqRange(int64_t lo, int64_t hi) {
  if (lo < 0 && hi < 0) return "no collective yet";
  if (lo == hi) return "#" + std::to_string(lo);
  return "#" + std::to_string(std::max<int64_t>(lo, 0)) + "-#" + std::to_string(hi);
}

void CopyIfThere(const std::string& from, const std::string& to, std::vector<std::string>* files,
                 std::vector<std::string>* problems) {
  std::error_code ec;
  if (!fs::is_regular_file(from, ec)) return;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) {
    problems->push_back("cannot copy " + from + ": " + ec.message());
  } else {
    files->push_back(rundir::FileName(to));
  }
}

}  // namespace

std::vector<std::string> DescribeLiveRanks(const std::vector<RankLiveState>& ranks,
                                           const std::vector<std::string>& states, int64_t now,
                                           bool* all_moving) {
  std::vector<std::string> lines;
  std::vector<int> stopped, exited, unlinked, moving;
  // (seq, op) -> stuck ranks, and the longest wait among them.
  std::map<std::pair<int64_t, std::string>, std::pair<std::vector<int>, int64_t>> stuck;
  for (const RankLiveState& r : ranks) {
    const std::string state = r.rank < static_cast<int>(states.size()) ? states[r.rank] : "";
    if (r.exited) {
      exited.push_back(r.rank);
    } else if (!state.empty() && state[0] == 'T') {
      stopped.push_back(r.rank);
    } else if (!r.linked) {
      unlinked.push_back(r.rank);
    } else if (InFlight(r.status) && r.last_progress_unix_ms > 0 &&
               now - r.last_progress_unix_ms >= kStuckMs) {
      auto& s = stuck[{Position(r.status), r.status.current_op}];
      s.first.push_back(r.rank);
      s.second = std::max(s.second, now - r.last_progress_unix_ms);
    } else {
      moving.push_back(r.rank);
    }
  }
  if (all_moving) *all_moving = stopped.empty() && stuck.empty() && exited.empty();
  int64_t lo = INT64_MAX, hi = -1, step_lo = INT64_MAX, step_hi = -1;
  // `ranks` may hold some ranks only (one rank's own line): look them up by rank, not index.
  for (const RankLiveState& r : ranks) {
    if (std::find(moving.begin(), moving.end(), r.rank) == moving.end()) continue;
    lo = std::min(lo, Position(r.status));
    hi = std::max(hi, Position(r.status));
    step_lo = std::min(step_lo, r.status.step);
    step_hi = std::max(step_hi, r.status.step);
  }
  for (int r : stopped) {
    lines.push_back("rank " + std::to_string(r) + " is stopped (process state " + states[r] +
                    "): it cannot move until SIGCONT");
  }
  for (const auto& [where, who] : stuck) {
    const std::string op = where.second.empty() ? "collective" : where.second;
    const bool one = who.first.size() == 1;
    std::string line = NameRanks(who.first) + (one ? " has" : " have") + " been in " + op + " #" +
                       std::to_string(where.first) + " for " + FormatDurationMs(who.second);
    if (!moving.empty()) {
      line += " while the others are at " + SeqRange(lo, hi);
    } else if (stuck.size() == 1 && stopped.empty() && exited.empty()) {
      line += "; no rank moves";
    }
    lines.push_back(line);
  }
  if (!moving.empty()) {
    std::string line = NameRanks(moving) + " running: " +
                       (hi < 0 ? std::string("no collective yet")
                               : (lo == hi ? "collective " : "collectives ") + SeqRange(lo, hi)) +
                       ", step " + std::to_string(step_lo) +
                       (step_hi != step_lo ? "-" + std::to_string(step_hi) : "");
    lines.push_back(line);
  }
  if (!unlinked.empty()) {
    lines.push_back(NameRanks(unlinked) + " running (no flight recorder: native stacks only)");
  }
  if (!exited.empty()) lines.push_back(NameRanks(exited) + " exited");
  return lines;
}

rundir::DumpManifest TakeLiveDump(JobView& job, const std::string& folder,
                                  const rundir::DumpRequest& request,
                                  const LiveDumpOptions& options) {
  rundir::DumpManifest m;
  m.requested_unix_ms = request.unix_ms;
  m.trigger = request.trigger;
  m.attempt = options.attempt;
  const std::string run_dir = job.run_dir();
  const rundir::RunDir run(run_dir);
  const rundir::DumpDir dump(folder);
  std::vector<RankLiveState> ranks = job.Ranks();
  m.world_size = static_cast<int>(ranks.size());
  std::set<int> wanted(request.ranks.begin(), request.ranks.end());
  if (wanted.empty()) {
    for (const RankLiveState& r : ranks) wanted.insert(r.rank);
  }
  auto is_wanted = [&](int rank) { return wanted.count(rank) > 0; };

  // A Python agent rewrites flight.json every 2 s anyway: its answer is new Python stacks and a
  // flight.json written after them. Another node's files carry node 0's push times, in the
  // push's order: there new Python stacks are the answer.
  auto answer_file = [&](const RankLiveState& r) {
    return r.runs_agent ? run.rank(r.rank).py_stacks() : run.rank(r.rank).flight();
  };
  auto has_answered = [&](const RankLiveState& r,
                          const std::tuple<int64_t, int64_t, int64_t>& was) {
    const auto now = base::FileVersion(answer_file(r));
    if (now == was) return false;
    return !r.runs_agent || r.remote ||
           std::get<1>(base::FileVersion(run.rank(r.rank).flight())) >= std::get<1>(now);
  };
  std::map<int, std::tuple<int64_t, int64_t, int64_t>> before;
  for (const RankLiveState& r : ranks) before[r.rank] = base::FileVersion(answer_file(r));
  // A SIGUSR1'd rank dumped itself before it asked.
  if (request.ranks.empty()) job.RequestDump(request.trigger.empty() ? "dump" : request.trigger);

  // Native stacks of every living wanted rank, here and (through their agents) on other nodes,
  // while the ranks write their flight recorders.
  std::vector<StackTarget> targets;
  std::vector<int> remote;
  std::error_code ec;
  for (const RankLiveState& r : ranks) {
    if (!is_wanted(r.rank)) continue;
    fs::create_directories(dump.rank(r.rank), ec);
    if (r.exited) continue;
    if (r.remote) {
      remote.push_back(r.rank);
    } else if (r.pid > 0) {
      targets.push_back({r.rank, r.pid, rundir::RankDir(dump.rank(r.rank)).stacks()});
    }
  }
  auto remote_states = std::async(std::launch::async, [&] {
    return job.RemoteStacks(remote, options.stack_timeout + kRemoteMargin);
  });
  auto local = std::async(std::launch::async, [&] {
    return CaptureStacksInto(targets, options.stack_timeout, options.stack_tool);
  });

  std::map<int, bool> answered;
  const auto deadline = std::chrono::steady_clock::now() + options.dump_wait;
  while (request.ranks.empty()) {
    const auto now = std::chrono::steady_clock::now();
    bool all = true;
    for (const RankLiveState& r : ranks) {
      if (!r.linked || r.exited || answered[r.rank]) continue;
      if (now >= deadline + (r.remote ? kRemoteTrip : std::chrono::seconds(0))) continue;
      const std::string state = r.remote ? "" : ProcessState(r.pid);
      if (!state.empty() && state[0] == 'T') continue;  // stopped: cannot answer
      if (has_answered(r, before[r.rank])) {
        answered[r.rank] = true;
      } else {
        all = false;  // another node's ranks' files arrive pushed, after its STACKS answer too
      }
    }
    if (all) break;
    std::this_thread::sleep_for(kPollInterval);
  }
  std::vector<std::string> states(ranks.size());
  for (const StackResult& r : local.get()) {
    if (r.rank >= 0 && r.rank < static_cast<int>(states.size())) states[r.rank] = r.process_state;
    if (!r.problem.empty()) m.problems.push_back(r.problem);
  }
  for (const auto& [rank, state] : remote_states.get()) {
    if (rank >= 0 && rank < static_cast<int>(states.size())) states[rank] = state;
  }
  for (const RankLiveState& r : ranks) {
    if (request.ranks.empty() && r.linked && !answered[r.rank]) {
      answered[r.rank] = has_answered(r, before[r.rank]);
    }
    if (!request.ranks.empty() && is_wanted(r.rank)) answered[r.rank] = r.linked;
  }
  const int64_t now = base::UnixMillis();

  // The files, as they are now; another node's stacks came with its node's push.
  for (const RankLiveState& r : ranks) {
    if (!is_wanted(r.rank)) continue;
    rundir::DumpRank d;
    d.rank = r.rank;
    d.pid = r.remote ? 0 : r.pid;
    d.answered = answered[r.rank];
    d.exited = r.exited;
    d.process_state = states[r.rank];
    const rundir::RankDir from = run.rank(r.rank);
    for (const char* name : kRankFiles) {
      CopyIfThere(from.path() + "/" + name, dump.rank(r.rank) + "/" + name, &d.files, &m.problems);
    }
    if (r.remote) {
      // Taken for this dump only: the rank folder keeps the stacks of a diagnosis.
      CopyIfThere(from.stacks(), rundir::RankDir(dump.rank(r.rank)).stacks(), &d.files,
                  &m.problems);
      fs::remove(from.stacks(), ec);
    } else if (fs::exists(rundir::RankDir(dump.rank(r.rank)).stacks(), ec)) {
      d.files.push_back("stacks.txt");
    }
    std::sort(d.files.begin(), d.files.end());
    m.ranks.push_back(std::move(d));
  }

  // Where the ranks stand, then what the analysis makes of the evidence, over the run directory
  // as a live diagnosis reads it, with this dump's stacks.
  bool all_moving = false;
  m.summary = DescribeLiveRanks(ranks, states, now, &all_moving);
  for (rundir::DumpRank& d : m.ranks) {
    const std::vector<std::string> one = DescribeLiveRanks({ranks[d.rank]}, states, now);
    if (!one.empty()) d.where = one.front();
  }
  RunSnapshot snapshot;
  try {
    snapshot = LoadRunDirForLauncher(run_dir, static_cast<int>(ranks.size()));
  } catch (const Error& e) {
    m.problems.push_back(e.what());
  }
  Diagnosis diagnosis;
  if (snapshot.ranks.size() == ranks.size()) {
    for (const RankLiveState& r : ranks) {
      RankRecord& rec = snapshot.ranks[r.rank];
      rec.live = r;
      rec.answered_dump = answered[r.rank];
      rec.process_state =
          states[r.rank].empty() && !r.exited && !r.remote ? ProcessState(r.pid) : states[r.rank];
      std::string stacks;
      if (base::ReadFileBounded(rundir::RankDir(dump.rank(r.rank)).stacks(), 4 << 20, &stacks) ==
          base::ReadStatus::kOk) {
        rec.stacks = std::move(stacks);
      }
    }
    const std::string no_summary = rundir::FileName(run.summary()) + " missing";
    snapshot.problems.erase(
        std::remove_if(snapshot.problems.begin(), snapshot.problems.end(),
                       [&](const std::string& p) { return p.rfind(no_summary, 0) == 0; }),
        snapshot.problems.end());
    if (auto stragglers = job.Stragglers()) snapshot.stragglers = std::move(*stragglers);
    AnalyzeOptions ao;
    ao.now_unix_ms = now;
    ao.trigger = m.trigger;
    diagnosis = Analyze(snapshot, ao);
    // Records read moments apart from ranks that move look like a hang: while every rank moves
    // only a mismatch or a failure the records show is a finding.
    if (all_moving && diagnosis.kind != DiagnosisKind::kMismatch &&
        diagnosis.kind != DiagnosisKind::kFailure) {
      diagnosis.kind = DiagnosisKind::kOk;
      diagnosis.headline = "OK so far: every rank is moving; nothing stuck";
      diagnosis.culprit_ranks.clear();
    }
    m.headline = diagnosis.headline;
  }
  std::string text;
  for (const std::string& line : m.summary) text += line + "\n";
  if (all_moving && diagnosis.kind == DiagnosisKind::kOk) {
    text += diagnosis.headline + "\n";
  } else if (!diagnosis.headline.empty()) {
    text += "\n" + FormatDiagnosis(diagnosis);
  }
  try {
    rundir::WriteDiagnosis(rundir::RunDir(folder), diagnosis, text);
  } catch (const Error& e) {
    m.problems.push_back(e.what());
  }
  m.done_unix_ms = base::UnixMillis();
  try {
    rundir::WriteDumpManifest(dump.manifest(), m);
  } catch (const Error& e) {
    m.problems.push_back(e.what());
  }
  return m;
}

}  // namespace dlaunch::launcher
