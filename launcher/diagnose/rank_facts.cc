#include "launcher/diagnose/rank_facts.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <map>
#include <regex>
#include <tuple>

#include "core/base/format.h"
#include "core/base/proc.h"
#include "core/exit_codes.h"

namespace dlaunch::launcher {
namespace {

using rundir::EventKind;
using rundir::RankStatus;

// A heartbeat's seqs over what the flight records say: the newest wins, the heartbeat on a tie.
void MergeHeartbeatSeqs(int64_t last_completed, int64_t last_started, RankFacts& v) {
  if (last_completed >= v.last_completed) {
    v.last_completed = last_completed;
    v.progress_from = ProgressSource::kHeartbeat;
  }
  v.last_started = std::max({v.last_started, last_started, v.last_completed});
}

void MergeFlightAndTelemetry(const RankRecord& rec, RankFacts& v) {
  if (rec.flight_state == rundir::FileState::kOk) {
    v.flight = &rec.flight;
    v.has_progress = true;
    v.last_completed = rec.flight.LastCompletedSeq();
    v.last_started = std::max(v.last_completed, rec.flight.LastStartedSeq());
    v.ref_ms = std::max(v.ref_ms, rec.flight.dumped_unix_ms);
    const bool from_tail = rec.tail_last_seq >= 0 && v.last_completed >= rec.tail_first_seq &&
                           v.last_completed <= rec.tail_last_seq;
    v.progress_from = from_tail ? ProgressSource::kFlightTail : ProgressSource::kFlightJson;
  }
  // heartbeat.json, as a live diagnosis has it from the stream (MergeLive): a seq counts as
  // progress; a heartbeat before any collective does not make a rank without records placeable.
  if (!rec.live && rec.heartbeat_unix_ms > 0 &&
      std::max(rec.heartbeat_last_completed_seq, rec.heartbeat_last_started_seq) >= 0) {
    v.has_progress = true;
    MergeHeartbeatSeqs(rec.heartbeat_last_completed_seq, rec.heartbeat_last_started_seq, v);
  }
  const auto& telemetry = rec.events.telemetry;
  v.telemetry = &telemetry;
  if (!telemetry.empty()) {
    const TelemetrySample& last = telemetry.back();
    v.phase = last.phase;
    v.step = last.step;
    v.memory = last;
    v.phase_since_ms = last.unix_ms;
    for (auto it = telemetry.rbegin(); it != telemetry.rend() && it->phase == last.phase; ++it) {
      v.phase_since_ms = it->unix_ms;
    }
    v.ref_ms = std::max(v.ref_ms, last.unix_ms);
    v.last_activity_ms = std::max(v.last_activity_ms, last.unix_ms);
  }
  // Only times the records hold: a file's modification time changes with `cp -r`, so a copied
  // run directory would read as waiting until it was copied.
  for (const Event& e : rec.events.events) v.ref_ms = std::max(v.ref_ms, e.unix_ms);
  if (rec.error) v.ref_ms = std::max(v.ref_ms, rec.error->unix_ms);
  v.ref_ms = std::max(v.ref_ms, rec.heartbeat_unix_ms);
}

void MergeLive(const RankRecord& rec, const FactsOptions& options, RankFacts& v) {
  if (!rec.live) return;
  const RankLiveState& live = *rec.live;
  v.live = true;
  v.linked = live.linked;
  if (live.linked) {
    v.has_progress = true;
    MergeHeartbeatSeqs(live.status.last_completed_seq, live.status.last_started_seq, v);
    v.current_op = live.status.current_op;
    const std::string live_phase = core::PhaseName(live.status.phase);
    // The telemetry's timestamps are the rank's own; the monitor only sees heartbeats.
    if (live_phase != v.phase || v.phase_since_ms == 0) {
      v.phase = live_phase;
      if (rec.live_phase_since_unix_ms > 0) v.phase_since_ms = rec.live_phase_since_unix_ms;
    }
    v.step = live.status.step;
    if (live.status.rss_bytes >= 0) v.memory.rss_bytes = live.status.rss_bytes;
    if (live.status.device_allocated_bytes >= 0) {
      v.memory.device_allocated_bytes = live.status.device_allocated_bytes;
    }
    if (live.status.device_reserved_bytes >= 0) {
      v.memory.device_reserved_bytes = live.status.device_reserved_bytes;
    }
    if (!rec.answered_dump && !live.exited) {
      v.missed_dump = true;
      if (options.now_unix_ms > 0 && live.last_heartbeat_unix_ms > 0) {
        v.heartbeat_age_ms = options.now_unix_ms - live.last_heartbeat_unix_ms;
      }
    }
  }
  if (!live.heartbeat_write_error.empty()) {
    // Said plainly: every file of that rank is likely as old (a full disk, an immutable folder).
    v.notes.push_back("its heartbeat file could not be written (" + live.heartbeat_write_error +
                      "); its heartbeats reached the launcher through the agent's pipe");
  }
  v.last_activity_ms =
      std::max({v.last_activity_ms, live.last_output_unix_ms, live.last_progress_unix_ms});
  v.exited = live.exited;
}

// Its own collective watchdog wrote that it timed out (error.json or a "timeout" event).
bool ReportedTimeout(const RankRecord& rec) {
  if (rec.error && rundir::ParseEventKind(rec.error->kind) == EventKind::kTimeout) return true;
  // A flight recorder that a dlaunch watchdog dumped when it fired says so too.
  if (rec.flight_state == rundir::FileState::kOk && rec.flight.reason == "timeout") return true;
  return std::any_of(rec.events.events.begin(), rec.events.events.end(),
                     [](const Event& e) { return e.type() == EventKind::kTimeout; });
}

void MergeSummary(const RankRecord& rec, const FactsOptions& options, RankFacts& v) {
  if (!rec.summary) return;
  const rundir::SummaryRank& s = *rec.summary;
  const int exit_code = s.exit_code.value_or(0);
  int signal = s.signal;
  if (signal == 0 && exit_code < 0 && s.status != RankStatus::kRunning) signal = -exit_code;
  if (s.status != RankStatus::kRunning && s.status != RankStatus::kUnknown) {
    v.exited = true;
    v.exit_code = exit_code;
    v.signal = signal;
  }
  v.torn_down = s.status == RankStatus::kKilled;
  // Stopped when the teardown began: it had stopped answering before the failure that ended the
  // attempt (the others' watchdogs fired first), as a hang's live capture would have seen it.
  if (s.stopped_at_teardown && !v.stopped) {
    v.stopped = true;
    v.process_state = base::ProcStateWord('T');
  }
  // Exit code 3 means "my collective watchdog fired" only from a rank that said so: any other
  // program (a Python script's sys.exit(3), torch's own test programs) means what it means.
  v.watchdog_exit = exit_code == kExitHang && s.signal == 0 && ReportedTimeout(rec);
  const int64_t end = s.end_unix_ms.value_or(0);
  if (options.now_unix_ms == 0 && end > 0) v.ref_ms = std::max(v.ref_ms, end);
  const bool bad_exit = v.exited && (exit_code != 0 || signal != 0);
  // "killed" ranks were torn down by the launcher after someone else failed.
  if (bad_exit && !v.torn_down && !v.watchdog_exit) {
    v.failure.source = FailureSource::kExit;
    v.failure.at_unix_ms = end;
    v.failure.bad_exit = true;
    v.failure.exit_code = exit_code;
    v.failure.signal = signal;
    v.failure.launcher_error = s.error;
    // Last words such as Gloo's "Connection reset by peer" say the rank ended of another's
    // failure, however early its launcher saw the exit (a peer's node may reap later).
    auto last = std::find_if(rec.stderr_tail.rbegin(), rec.stderr_tail.rend(),
                             [](const std::string& line) { return !line.empty(); });
    v.failure.consequence = last != rec.stderr_tail.rend() && IsFallout(*last);
  }
}

// error.json and error events name the cause better than an exit code; an OOM or a non-finite
// loss beats any other message because it explains the errors that follow it.
void MergeErrors(const RankRecord& rec, RankFacts& v) {
  bool from_error = false;
  auto consider = [&](const std::string& kind_name, const std::string& message, int64_t at) {
    const EventKind kind = rundir::ParseEventKind(kind_name);
    const bool cause = kind == EventKind::kOom || kind_name == "nan";
    if (!cause && kind != EventKind::kError) return;
    const bool have_cause =
        v.failure.source == FailureSource::kOom || v.failure.source == FailureSource::kNan;
    if (have_cause || (from_error && !cause)) return;
    v.failure.source = kind == EventKind::kOom ? FailureSource::kOom
                       : cause                 ? FailureSource::kNan
                                               : FailureSource::kError;
    v.failure.message = message;
    v.failure.consequence = !cause && IsFallout(message);
    from_error = true;
    if (at > 0 && (v.failure.at_unix_ms == 0 || at < v.failure.at_unix_ms)) {
      v.failure.at_unix_ms = at;
    }
  };
  auto claim = [&](const nlohmann::json& body) {
    TimeoutClaim c;
    auto seq = body.find("seq");
    if (seq != body.end() && seq->is_number_integer()) c.seq = seq->get<int64_t>();
    auto missing = body.find("missing_ranks");
    if (missing != body.end() && missing->is_array()) {
      for (const auto& r : *missing) {
        if (r.is_number_integer() && r.get<int64_t>() >= 0 && r.get<int64_t>() < rundir::kMaxRanks)
          c.missing_ranks.push_back(r.get<int>());
      }
    }
    v.timeout_claims.push_back(std::move(c));
  };
  if (rec.error) {
    const EventKind kind = rundir::ParseEventKind(rec.error->kind);
    consider(rec.error->kind, rec.error->message, rec.error->unix_ms);
    if (kind == EventKind::kTimeout) {
      v.reported_timeout = true;
      claim(rec.error->fields);
    }
  }
  for (const Event& e : rec.events.events) {
    auto message = e.body.find("message");
    consider(e.kind,
             message != e.body.end() && message->is_string() ? message->get<std::string>()
                                                             : std::string(),
             e.unix_ms);
    if (e.type() == EventKind::kTimeout) {
      v.reported_timeout = true;
      claim(e.body);
    }
  }
}

// A SIGKILLed rank's last known resident memory against the host's: the OOM killer picks the
// largest process, so a rank holding at least half of the host's memory is a sign of it.
std::string MemoryPressure(const RankFacts& v) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (v.memory.rss_bytes <= 0 || pages <= 0 || page <= 0) return "";
  const int64_t host = static_cast<int64_t>(pages) * page;
  if (v.memory.rss_bytes * 2 < host) return "";
  return "its RSS was " + base::FormatBytes(v.memory.rss_bytes) + " of the host's " +
         base::FormatBytes(host);
}

// summary.json's "running" rank whose pid no longer exists on this host.
bool Vanished(const RankRecord& rec) {
  if (!rec.summary || rec.summary->status != RankStatus::kRunning || rec.summary->pid <= 0) {
    return false;
  }
  const std::string host = base::Hostname();
  if (host.empty() || rec.summary->host != host) return false;
  return ::kill(rec.summary->pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

bool IsFallout(const std::string& message) {
  // The shared-memory transport names the peer it lost: "rank 2 (pid 4242) died", "rank 2 left
  // (its communicator was destroyed)" (core/comm/shm_group.cc).
  static const std::regex fallout(
      R"(peer|connection (closed|reset)|broken pipe|timed out|timeout|abort|remote|)"
      R"(rank \d+ (\(pid \d+\) died|left\b))",
      std::regex::icase);
  return std::regex_search(message, fallout);
}

FailureWeight WeightOf(const RankFailure& f) {
  if (f.source == FailureSource::kOom || f.source == FailureSource::kNan) {
    return FailureWeight::kCause;
  }
  return f.consequence ? FailureWeight::kFallout : FailureWeight::kOwn;
}

int PickRootCause(const std::vector<RankFacts>& facts) {
  // A collective watchdog that fired says the job hung: an error that reads as losing a peer is
  // then the hang's fallout (the rank whose watchdog fired left), never its cause.
  const bool hang = FirstWatchdogExit(facts) >= 0;
  int root = -1;
  auto key = [&](const RankFacts& r) {
    const int64_t at = r.failure.at_unix_ms > 0 ? r.failure.at_unix_ms : INT64_MAX;
    return std::make_tuple(WeightOf(r.failure), at);
  };
  for (size_t i = 0; i < facts.size(); ++i) {
    if (!facts[i].failed() || (hang && WeightOf(facts[i].failure) == FailureWeight::kFallout)) {
      continue;
    }
    if (root < 0 || key(facts[i]) < key(facts[root])) root = static_cast<int>(i);
  }
  return root;
}

int FirstWatchdogExit(const std::vector<RankFacts>& facts) {
  int first = -1;
  auto end = [&](int i) {
    const RankRecord* rec = facts[i].record;
    const int64_t at = rec && rec->summary ? rec->summary->end_unix_ms.value_or(0) : 0;
    return at > 0 ? at : INT64_MAX;
  };
  for (size_t i = 0; i < facts.size(); ++i) {
    if (!facts[i].watchdog_exit) continue;
    if (first < 0 || end(static_cast<int>(i)) < end(first)) first = static_cast<int>(i);
  }
  return first;
}

int64_t RecordedEndUnixMs(const RunSnapshot& run, const std::vector<RankFacts>& facts) {
  int64_t end = run.ended_unix_ms;
  for (const RankFacts& v : facts) end = std::max(end, v.ref_ms);
  return end;
}

void ReferToTheRecordedEnd(const RunSnapshot& run, std::vector<RankFacts>& facts) {
  // An exited rank's records stop when it did. One with no recorded exit (a SIGKILLed launcher
  // records none) was there as long as the run's records go on: measured to its own last record
  // it would look busy to the very end, "last output 0 ms ago".
  const int64_t end = RecordedEndUnixMs(run, facts);
  for (RankFacts& v : facts) {
    if (!v.exited) v.ref_ms = std::max(v.ref_ms, end);
  }
}

void MarkLostNodes(const RunSnapshot& run, std::vector<RankFacts>& facts) {
  std::map<int, std::string> lost;
  for (const rundir::SummaryNode& n : run.nodes) {
    if (n.status == RankStatus::kLost && n.node_rank > 0) {
      lost[n.node_rank] = "node " + std::to_string(n.node_rank) + " (" + n.host + ")";
    }
  }
  if (lost.empty()) return;
  for (RankFacts& v : facts) {
    // Global rank = node rank x ranks per node + local rank: that holds even for a rank the lost
    // node never reported (it went away before its first status).
    int node = -1;
    if (run.local_ranks > 0) {
      node = v.rank / run.local_ranks;
    } else if (v.record && v.record->summary && v.record->summary->node_rank) {
      node = *v.record->summary->node_rank;
    }
    auto it = lost.find(node);
    if (it == lost.end()) continue;
    v.lost_node = it->first;
    v.lost_node_label = it->second;
    v.exited = true;
    v.exit_code = -1;
    v.signal = 0;
    v.torn_down = false;
    // An error it reported itself before the loss still stands; an exit its node made up does not.
    if (v.failure.source == FailureSource::kExit) v.failure = RankFailure{};
    v.failure.bad_exit = false;
  }
}

const char* ProgressSourceName(ProgressSource source) {
  constexpr const char* kNames[] = {"", "heartbeat", "flight_tail", "flight"};
  return kNames[static_cast<int>(source)];
}

RankFacts GatherFacts(const RankRecord& rec, const FactsOptions& options) {
  RankFacts v;
  v.rank = rec.rank;
  v.record = &rec;
  v.dir_present = rec.dir_present;
  MergeFlightAndTelemetry(rec, v);
  MergeLive(rec, options, v);
  v.process_state = rec.process_state;
  v.stopped = !rec.process_state.empty() && rec.process_state[0] == 'T';
  if (options.now_unix_ms > 0) v.ref_ms = options.now_unix_ms;
  MergeSummary(rec, options, v);
  MergeErrors(rec, v);
  if (v.failure.bad_exit && v.failure.signal == SIGKILL)
    v.failure.memory_pressure = MemoryPressure(v);
  v.vanished = options.now_unix_ms == 0 && !v.live && Vanished(rec);
  v.stack = ParseGdbStacks(rec.stacks);
  // A Python rank that answered the dump gave its own stacks instead of gdb's.
  if (v.stack.activity == StackActivity::kNone) v.stack = ParsePythonStacks(rec.py_stacks);
  v.nccl_warnings = rec.nccl_warnings;
  return v;
}

}  // namespace dlaunch::launcher
