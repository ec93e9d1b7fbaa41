#include "launcher/diagnose/analyzer.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "core/error.h"
#include "launcher/diagnose/diagnosis_writer.h"
#include "launcher/diagnose/format_util.h"
#include "launcher/nccl_log/parser.h"
#include "launcher/diagnose/trace_writer.h"

namespace dlaunch::launcher {
namespace {

using text::FormatBytes;
using text::FormatDurationMs;
using text::FormatRankList;
using text::FormatUnixMs;
using text::SignalName;

// A worker exits 3 when its own collective watchdog fired: a symptom of a hang, not a cause.
constexpr int kWatchdogExitCode = 3;

// What the analysis knows about one rank, merged from every source.
struct RankFacts {
  const RankRecord* record = nullptr;
  bool has_progress = false;  // flight recorder or heartbeat seqs known
  int64_t last_completed = -1;
  int64_t last_started = -1;
  int64_t ref_ms = 0;  // this rank's "now"
  std::string phase;
  int64_t phase_since_ms = 0;
  int64_t step = -1;
  int64_t rss = -1, device_allocated = -1, device_reserved = -1;
  bool exited = false;
  int exit_code = -1;
  int signal = 0;
  bool failed = false;  // a root-cause candidate
  int64_t failed_at_ms = 0;
  std::string failure;  // "exited with code 1", "out of memory: ..."
  bool oom = false;
  bool consequence = false;   // the failure looks like fallout of another rank's (peer gone)
  bool unresponsive = false;  // linked but did not answer the dump request
  std::string unresponsive_why;
  int64_t last_activity_ms = 0;  // output or telemetry: for programs without a flight recorder
};

int64_t JsonInt(const nlohmann::json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return fallback;
  return it->get<int64_t>();
}

std::string JsonString(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

// Messages that describe losing a peer or waiting for one: errors caused by another rank.
bool IsFallout(const std::string& message) {
  static const std::regex fallout(
      "peer|connection (closed|reset)|broken pipe|timed out|timeout|abort|remote",
      std::regex::icase);
  return std::regex_search(message, fallout);
}

RankFacts GatherFacts(const RankRecord& rec, const AnalyzeOptions& options) {
  RankFacts v;
  v.record = &rec;
  if (rec.flight.valid) {
    v.has_progress = true;
    v.last_completed = rec.flight.LastCompletedSeq();
    v.last_started = std::max(v.last_completed, rec.flight.LastStartedSeq());
    v.ref_ms = std::max(v.ref_ms, rec.flight.dumped_unix_ms);
  }
  if (!rec.telemetry.empty()) {
    const TelemetrySample& last = rec.telemetry.back();
    v.phase = last.phase;
    v.step = last.step;
    v.rss = last.rss_bytes;
    v.device_allocated = last.device_allocated_bytes;
    v.device_reserved = last.device_reserved_bytes;
    v.phase_since_ms = last.unix_ms;
    for (auto it = rec.telemetry.rbegin(); it != rec.telemetry.rend() && it->phase == last.phase;
         ++it) {
      v.phase_since_ms = it->unix_ms;
    }
    v.ref_ms = std::max(v.ref_ms, last.unix_ms);
    v.last_activity_ms = std::max(v.last_activity_ms, last.unix_ms);
  }
  for (const RankEvent& e : rec.events) v.ref_ms = std::max(v.ref_ms, e.unix_ms);
  v.last_activity_ms = std::max(v.last_activity_ms, rec.last_output_unix_ms);
  v.ref_ms = std::max(v.ref_ms, rec.last_output_unix_ms);

  if (rec.live) {
    const RankLiveState& live = *rec.live;
    if (live.linked) {
      v.has_progress = true;
      v.last_completed = std::max(v.last_completed, live.status.last_completed_seq);
      v.last_started = std::max({v.last_started, live.status.last_started_seq, v.last_completed});
      const std::string live_phase = core::PhaseName(live.status.phase);
      // The telemetry's timestamps are the rank's own; the monitor only sees heartbeats.
      if (live_phase != v.phase || v.phase_since_ms == 0) {
        v.phase = live_phase;
        if (rec.live_phase_since_unix_ms > 0) v.phase_since_ms = rec.live_phase_since_unix_ms;
      }
      v.step = live.status.step;
      if (live.status.rss_bytes >= 0) v.rss = live.status.rss_bytes;
      if (live.status.device_allocated_bytes >= 0) {
        v.device_allocated = live.status.device_allocated_bytes;
      }
      if (live.status.device_reserved_bytes >= 0) {
        v.device_reserved = live.status.device_reserved_bytes;
      }
      if (!rec.answered_dump && !live.exited) {
        v.unresponsive = true;
        v.unresponsive_why = "did not answer the dump request";
        if (options.now_unix_ms > 0 && live.last_heartbeat_unix_ms > 0) {
          v.unresponsive_why += ", no heartbeat for " +
                                FormatDurationMs(options.now_unix_ms - live.last_heartbeat_unix_ms);
        }
      }
    }
    v.last_activity_ms =
        std::max({v.last_activity_ms, live.last_output_unix_ms, live.last_progress_unix_ms});
    v.exited = live.exited;
  }
  if (!rec.process_state.empty() && rec.process_state[0] == 'T') {
    v.unresponsive = true;
    if (v.unresponsive_why.empty())
      v.unresponsive_why = "process " + rec.process_state;
    else
      v.unresponsive_why += ", process " + rec.process_state;
  }
  if (options.now_unix_ms > 0) v.ref_ms = options.now_unix_ms;

  if (rec.summary) {
    const RankSummary& s = *rec.summary;
    if (s.status != "running" && !s.status.empty()) {
      v.exited = true;
      v.exit_code = s.exit_code;
      v.signal = s.signal;
    }
    if (options.now_unix_ms == 0 && s.end_unix_ms > 0) v.ref_ms = std::max(v.ref_ms, s.end_unix_ms);
    bool bad_exit = v.exited && (s.exit_code != 0 || s.signal != 0);
    // "killed" ranks were torn down by the launcher after someone else failed.
    if (bad_exit && s.status != "killed" && s.exit_code != kWatchdogExitCode) {
      v.failed = true;
      v.failed_at_ms = s.end_unix_ms;
      if (s.signal != 0) {
        v.failure = "was killed by " + SignalName(s.signal);
        if (s.signal == 9) v.failure += " (host out of memory? check dmesg for the OOM killer)";
      } else {
        v.failure = "exited with code " + std::to_string(s.exit_code);
      }
      if (!s.error.empty()) v.failure += ": " + s.error;
    }
  }
  // error.json and error events name the cause better than an exit code; an OOM beats any other
  // message because it explains the errors that follow it.
  const std::string exit_failure = v.failure;
  bool from_error = false;
  auto consider_error = [&](const std::string& kind, const std::string& message, int64_t at) {
    if (kind != "oom" && kind != "error") return;
    if (v.oom || (from_error && kind != "oom")) return;
    std::string what = kind == "oom" ? "ran out of memory" : "reported an error";
    if (!message.empty()) what += ": " + message;
    if (!exit_failure.empty()) what += " (" + exit_failure + ")";
    v.failure = what;
    v.oom = kind == "oom";
    v.failed = true;
    v.consequence = !v.oom && IsFallout(message);
    from_error = true;
    if (at > 0 && (v.failed_at_ms == 0 || at < v.failed_at_ms)) v.failed_at_ms = at;
  };
  if (rec.error) {
    consider_error(JsonString(*rec.error, "kind"), JsonString(*rec.error, "message"),
                   JsonInt(*rec.error, "unix_ms", 0));
  }
  for (const RankEvent& e : rec.events) {
    consider_error(e.kind, JsonString(e.body, "message"), e.unix_ms);
  }
  return v;
}

struct Signature {
  std::string op, dtype;
  int64_t count;
  int root;
  bool operator<(const Signature& o) const {
    return std::tie(op, dtype, count, root) < std::tie(o.op, o.dtype, o.count, o.root);
  }
  bool operator==(const Signature& o) const {
    return op == o.op && dtype == o.dtype && count == o.count && root == o.root;
  }
};

Signature SignatureOf(const FlightEntry& e) {
  return Signature{e.op, e.dtype, e.count, e.op == "broadcast" ? e.root : -1};
}

bool IsPointToPoint(const std::string& op) { return op == "send" || op == "recv"; }

std::string DescribeCollective(const std::string& op, const std::string& dtype, int64_t count,
                               int64_t bytes) {
  std::string out = op.empty() ? "?" : op;
  if (!dtype.empty()) out += " " + dtype;
  if (bytes >= 0) {
    out += " " + FormatBytes(bytes);
  } else if (count >= 0) {
    out += " x" + std::to_string(count);
  }
  return out;
}

std::string Plural(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + FormatRankList(ranks);
}

// The main thread's frames ("Thread 1" in gdb's output), innermost first.
std::string MainThreadStack(const std::string& stacks) {
  size_t at = stacks.rfind("\nThread 1 ");
  if (at != std::string::npos) {
    ++at;
  } else if (stacks.rfind("Thread 1 ", 0) == 0) {
    at = 0;
  } else {
    return "";
  }
  size_t end = stacks.find("\n\n", at + 1);
  return stacks.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// Innermost frames of the main thread, for one-line display.
std::string StackTop(const std::string& stacks) {
  std::istringstream in(MainThreadStack(stacks));
  std::string line;
  std::getline(in, line);  // "Thread 1 (...)"
  static const std::regex frame_re(R"(^#[0-9]+\s+(?:0x[0-9a-fA-F]+ in )?([^\s(]+))");
  std::vector<std::string> frames;
  while (std::getline(in, line) && !line.empty() && frames.size() < 4) {
    std::smatch m;
    if (std::regex_search(line, m, frame_re)) frames.push_back(m[1].str());
  }
  std::string out;
  for (const std::string& f : frames) out += (out.empty() ? "" : " < ") + f;
  return out;
}

// Whether a main thread waits inside a collective: the frames of the communication libraries
// (or a process-shared barrier) rather than data loading, compute or a sleep.
bool WaitsInCollective(const std::string& stacks) {
  static const std::regex comm(
      "gloo|nccl|c10d|ProcessGroup|all_?reduce|all_?gather|reduce_?scatter|broadcast|barrier|"
      "MPI_|cudaStreamSynchronize|cudaDeviceSynchronize|Work::Wait",
      std::regex::icase);
  const std::string main = MainThreadStack(stacks);
  return !main.empty() && std::regex_search(main, comm);
}

// What a main thread is doing, from its innermost frames: "collective" (inside a communication
// library), "wait" (blocked on a read, a lock, a poll), "sleep", "run" (anything else), or "" when
// no stack was captured.
std::string StackClass(const std::string& stacks) {
  const std::string main = MainThreadStack(stacks);
  if (main.empty()) return "";
  if (WaitsInCollective(stacks)) return "collective";
  static const std::regex sleep_re("nanosleep|pysleep|time_sleep|usleep|\\bsleep",
                                   std::regex::icase);
  static const std::regex wait_re(
      "\\b(__GI___libc_)?(read|recv|recvfrom|recvmsg|poll|ppoll|select|epoll_wait|accept|"
      "futex_wait|__futex_abstimed_wait|pthread_cond_(timed)?wait|sem_wait|pause|sigwait)",
      std::regex::icase);
  // Only the innermost frames decide: everything is called from main().
  std::istringstream in(main);
  std::string line, top;
  std::getline(in, line);
  for (int i = 0; i < 3 && std::getline(in, line); ++i) top += line + "\n";
  if (std::regex_search(top, sleep_re)) return "sleep";
  if (std::regex_search(top, wait_re)) return "wait";
  return "run";
}

// The memory trend of a rank before it ran out of memory, as one sentence.
std::string MemoryTrend(const RankRecord& rec) {
  std::vector<const TelemetrySample*> device, host;
  for (const TelemetrySample& s : rec.telemetry) {
    if (s.device_allocated_bytes >= 0) device.push_back(&s);
    if (s.rss_bytes >= 0) host.push_back(&s);
  }
  const bool use_device = device.size() >= 2;
  const auto& samples = use_device ? device : host;
  if (samples.size() < 2) return "";
  size_t first = samples.size() > 20 ? samples.size() - 20 : 0;
  const TelemetrySample& a = *samples[first];
  const TelemetrySample& b = *samples.back();
  int64_t va = use_device ? a.device_allocated_bytes : a.rss_bytes;
  int64_t vb = use_device ? b.device_allocated_bytes : b.rss_bytes;
  std::string out = "memory trend of rank " + std::to_string(rec.rank) + ": " +
                    (use_device ? "device allocated " : "host RSS ") + FormatBytes(va) + " -> " +
                    FormatBytes(vb);
  int64_t steps = (a.step >= 0 && b.step > a.step) ? b.step - a.step : 0;
  if (steps > 0) {
    out += " over " + std::to_string(steps) + " steps (" + (vb >= va ? "+" : "-") +
           FormatBytes(std::abs(vb - va) / steps) + "/step)";
  } else {
    out += " over " + FormatDurationMs(b.unix_ms - a.unix_ms);
  }
  if (use_device && b.device_total_bytes > 0) {
    out += "; device total " + FormatBytes(b.device_total_bytes);
    if (b.device_free_bytes >= 0) out += ", free " + FormatBytes(b.device_free_bytes);
    if (b.device_reserved_bytes >= 0) out += ", reserved " + FormatBytes(b.device_reserved_bytes);
  }
  if (vb > va && steps > 0) out += ": memory grew every step (a leak, or activations kept alive?)";
  return out;
}

// One analysis of one snapshot: gathers the facts per rank, finds mismatches, the frontier
// collective and the first failure, then writes the verdict and one line per rank.
class Analysis {
 public:
  Analysis(const RunSnapshot& run, const AnalyzeOptions& options) : run_(run), options_(options) {
    d_.run_dir = run.run_dir;
    d_.trigger = options.trigger;
    d_.problems = run.problems;
    d_.created_unix_ms = options.now_unix_ms;
    for (const RankRecord& rec : run.ranks) facts_.push_back(GatherFacts(rec, options));
  }

  Diagnosis Run() {
    if (facts_.empty()) {
      d_.kind = DiagnosisKind::kIncomplete;
      d_.headline = "INCOMPLETE: the run directory holds no rank data";
      return d_;
    }
    FindMismatch();
    FindFrontier();
    FindRootCause();
    if (mismatch_seq_ >= 0) {
      DescribeMismatch();
    } else if (root_) {
      DescribeFailure();
    } else if (HangEvidence() && any_progress_) {
      DescribeHang();
    } else if (HangEvidence() || options_.hang_suspected) {
      DescribeUnlinkedHang();
    } else if (AllOk()) {
      d_.kind = DiagnosisKind::kOk;
      d_.headline = "OK: all " + std::to_string(facts_.size()) + " ranks exited 0";
    } else {
      d_.kind = DiagnosisKind::kIncomplete;
      d_.headline = "INCOMPLETE: no hang or failure can be established from what is there";
      if (run_.exit_code) {
        d_.headline += " (launcher exit code " + std::to_string(*run_.exit_code) + ")";
      }
    }
    if (!d_.problems.empty() && d_.kind != DiagnosisKind::kOk) {
      d_.headline +=
          " [partial: " + std::to_string(d_.problems.size()) + " input(s) missing or unreadable]";
    }
    if (run_.live_diagnosis && options_.now_unix_ms == 0) {
      std::string live = JsonString(*run_.live_diagnosis, "headline");
      if (!live.empty()) d_.details.push_back("diagnosis recorded while the job ran: " + live);
    }
    WriteRankLines();
    return d_;
  }

 private:
  // The lowest collective at which ranks' flight recorders disagree. Collectives line up across
  // ranks by seq, unless send/recv calls (which count in seq) differ between ranks; then by
  // collective_seq, when the recorder wrote it.
  void FindMismatch() {
    bool saw_p2p = false;
    bool have_collective_seq = true;
    for (const RankRecord& rec : run_.ranks) {
      for (const FlightEntry& e : rec.flight.entries) {
        if (IsPointToPoint(e.op)) {
          saw_p2p = true;
        } else if (e.collective_seq < 0) {
          have_collective_seq = false;
        }
      }
    }
    const bool by_collective_seq = saw_p2p && have_collective_seq;
    if (saw_p2p && !by_collective_seq) {
      d_.details.push_back(
          "point-to-point calls in the flight recorders and no collective_seq: per-rank seqs need "
          "not line up, so collectives were not compared across ranks");
      return;
    }
    std::map<int64_t, std::map<int, const FlightEntry*>> by_key;  // key -> rank -> entry
    for (const RankRecord& rec : run_.ranks) {
      for (const FlightEntry& e : rec.flight.entries) {
        if (!IsPointToPoint(e.op))
          by_key[by_collective_seq ? e.collective_seq : e.seq][rec.rank] = &e;
      }
    }
    for (const auto& [key, entries] : by_key) {
      std::map<Signature, std::vector<int>> groups;
      for (const auto& [rank, e] : entries) groups[SignatureOf(*e)].push_back(rank);
      if (groups.size() < 2) continue;
      // The majority is right; on a tie, the group holding the lowest rank.
      auto best = groups.begin();
      for (auto it = groups.begin(); it != groups.end(); ++it) {
        if (it->second.size() > best->second.size() ||
            (it->second.size() == best->second.size() &&
             it->second.front() < best->second.front())) {
          best = it;
        }
      }
      d_.mismatch_type = "SIZE_OR_SYNTAX_MISMATCH";
      for (auto it = groups.begin(); it != groups.end(); ++it) {
        if (it == best) continue;
        mismatch_culprits_.insert(mismatch_culprits_.end(), it->second.begin(), it->second.end());
        if (it->first.op != best->first.op) {
          d_.mismatch_type = "COLLECTIVE_TYPE_MISMATCH";
        } else if (it->first.dtype != best->first.dtype &&
                   d_.mismatch_type != "COLLECTIVE_TYPE_MISMATCH") {
          d_.mismatch_type = "COLLECTIVE_DTYPE_MISMATCH";
        }
      }
      std::sort(mismatch_culprits_.begin(), mismatch_culprits_.end());
      const FlightEntry* good = entries.at(best->second.front());
      mismatch_seq_ = good->seq;
      mismatch_groups_ = groups;
      mismatch_entries_ = entries;
      SetCollective(*good);
      if (by_collective_seq) {
        d_.details.push_back("compared by collective_seq (point-to-point calls shift seq): #" +
                             std::to_string(mismatch_seq_) + " is collective_seq " +
                             std::to_string(key) + " on rank " +
                             std::to_string(best->second.front()));
      }
      return;
    }
  }

  // The lowest seq not completed everywhere, and who entered it. A rank that stopped answering is
  // known only from its last heartbeat, which may be long out of date: it does not move the
  // frontier while fresher ranks exist, and where it stands is unknown unless the heartbeat fits.
  void FindFrontier() {
    bool any_fresh = false;
    for (const RankFacts& v : facts_) any_fresh = any_fresh || (v.has_progress && !v.unresponsive);
    int64_t min_completed = -1;
    for (const RankFacts& v : facts_) {
      if (!v.has_progress || (any_fresh && v.unresponsive)) continue;
      min_completed = any_progress_ ? std::min(min_completed, v.last_completed) : v.last_completed;
      any_progress_ = true;
    }
    frontier_ = any_progress_ ? min_completed + 1 : -1;
    for (const RankFacts& v : facts_) {
      const RankRecord& rec = *v.record;
      if (!v.has_progress) {
        unknown_.push_back(rec.rank);
        continue;
      }
      const FlightEntry* e = rec.flight.Find(frontier_);
      if (e) frontier_entries_[rec.rank] = e;
      if (e || v.last_started >= frontier_) {
        entered_.push_back(rec.rank);
      } else if (!v.unresponsive || v.last_completed >= frontier_ - 1) {
        missing_.push_back(rec.rank);
      } else {
        stale_.insert(rec.rank);
      }
    }
  }

  // The first observed failure; a rank's own failure beats another's "peer gone" error, whatever
  // the clocks say.
  void FindRootCause() {
    for (const RankFacts& v : facts_) {
      if (!v.failed) continue;
      if (!root_) {
        root_ = &v;
        continue;
      }
      int64_t a = v.failed_at_ms > 0 ? v.failed_at_ms : INT64_MAX;
      int64_t b = root_->failed_at_ms > 0 ? root_->failed_at_ms : INT64_MAX;
      if (std::make_tuple(v.consequence, a) < std::make_tuple(root_->consequence, b)) root_ = &v;
    }
  }

  bool HangEvidence() const {
    bool timeouts = false;
    bool any_running = false;
    for (const RankFacts& v : facts_) {
      const RankRecord& rec = *v.record;
      if (rec.error && JsonString(*rec.error, "kind") == "timeout") timeouts = true;
      for (const RankEvent& e : rec.events) timeouts = timeouts || e.kind == "timeout";
      if (v.exited && v.exit_code == kWatchdogExitCode) timeouts = true;
      any_running = any_running || !v.exited;
    }
    const bool clean_end = run_.exit_code.has_value() && !any_running;
    const bool partial_frontier = !entered_.empty() && !missing_.empty();
    return options_.hang_suspected || timeouts || run_.exit_code == kWatchdogExitCode ||
           (partial_frontier && !clean_end);
  }

  bool AllOk() const {
    for (const RankFacts& v : facts_) {
      if (!v.exited || v.exit_code != 0 || v.signal != 0) return false;
    }
    return true;
  }

  void SetCollective(const FlightEntry& e) {
    d_.op = e.op;
    d_.dtype = e.dtype;
    d_.count = e.count;
    d_.bytes = e.bytes;
  }

  // Op, dtype and size of collective `seq` as most ranks recorded it, else the heartbeat's op.
  void FillCollective(int64_t seq) {
    std::map<Signature, std::pair<int, const FlightEntry*>> votes;
    for (const RankRecord& rec : run_.ranks) {
      if (const FlightEntry* e = rec.flight.Find(seq)) {
        auto& vote = votes[SignatureOf(*e)];
        if (vote.first++ == 0) vote.second = e;
      }
    }
    const FlightEntry* pick = nullptr;
    int most = 0;
    for (const auto& [signature, vote] : votes) {
      if (vote.first > most) {
        most = vote.first;
        pick = vote.second;
      }
    }
    if (pick) {
      SetCollective(*pick);
      return;
    }
    for (const RankFacts& v : facts_) {
      if (v.record->live && v.record->live->linked && v.last_started >= seq &&
          !v.record->live->status.current_op.empty()) {
        d_.op = v.record->live->status.current_op;
        return;
      }
    }
  }

  // How long `rank` has been inside the frontier collective; -1 when it is not in it.
  int64_t WaitingMs(int rank) const {
    auto it = frontier_entries_.find(rank);
    if (it == frontier_entries_.end()) return -1;
    const FlightEntry& e = *it->second;
    int64_t since_ns = e.started_unix_ns > 0 ? e.started_unix_ns : e.scheduled_unix_ns;
    if (since_ns <= 0 || e.state == "completed") return -1;
    int64_t ref = facts_[rank].ref_ms;
    return ref > 0 ? std::max<int64_t>(0, ref - since_ns / 1000000) : -1;
  }

  int64_t MaxWaitingMs(const std::vector<int>& ranks) const {
    int64_t w = -1;
    for (int r : ranks) w = std::max(w, WaitingMs(r));
    return w;
  }

  std::string PhaseFor(const RankFacts& v) const {
    std::string out = "phase " + v.phase;
    if (v.phase_since_ms > 0 && v.ref_ms >= v.phase_since_ms) {
      out += " for " + FormatDurationMs(v.ref_ms - v.phase_since_ms);
    }
    return out;
  }

  std::string DescribeMissing(int rank) const {
    const RankFacts& v = facts_[rank];
    std::string out = "last completed #" + std::to_string(v.last_completed);
    if (!v.phase.empty()) out += ", " + PhaseFor(v);
    if (v.unresponsive) out += ", " + v.unresponsive_why;
    if (v.exited && !TornDown(v)) {
      out += v.signal ? ", killed by " + SignalName(v.signal)
                      : (v.exit_code >= 0 ? ", exited with code " + std::to_string(v.exit_code)
                                          : ", exited");
    }
    return out;
  }

  static bool TornDown(const RankFacts& v) {
    return v.record->summary && v.record->summary->status == "killed";
  }

  std::string CollectiveLabel(int64_t seq) const {
    return "collective #" + std::to_string(seq) + " " +
           DescribeCollective(d_.op, d_.dtype, d_.count, d_.bytes);
  }

  void DescribeMismatch() {
    d_.kind = DiagnosisKind::kMismatch;
    d_.seq = mismatch_seq_;
    d_.culprit_ranks = mismatch_culprits_;
    d_.entered_ranks = entered_;
    d_.missing_ranks = missing_;
    std::string odd;
    std::vector<int> majority;
    for (const auto& [sig, ranks] : mismatch_groups_) {
      const bool is_culprit = std::find(mismatch_culprits_.begin(), mismatch_culprits_.end(),
                                        ranks.front()) != mismatch_culprits_.end();
      const FlightEntry* e = mismatch_entries_.at(ranks.front());
      std::string what = DescribeCollective(sig.op, sig.dtype, sig.count, -1);
      if (sig.root >= 0) what += " root " + std::to_string(sig.root);
      if (e->bytes >= 0) what += " (" + FormatBytes(e->bytes) + ")";
      d_.details.push_back("  #" + std::to_string(e->seq) + " " + Plural(ranks) + ": " + what);
      if (is_culprit) {
        odd += (odd.empty() ? "" : "; ") + Plural(ranks) + " called " + what;
      } else {
        majority = ranks;
      }
    }
    d_.headline = "MISMATCH at collective #" + std::to_string(mismatch_seq_) + " (" +
                  d_.mismatch_type + "): " + odd + " while " + Plural(majority) + " called " +
                  DescribeCollective(d_.op, d_.dtype, d_.count, -1);
  }

  void DescribeFailure() {
    d_.kind = DiagnosisKind::kFailure;
    const RankFacts& v = *root_;
    const int r = v.record->rank;
    d_.culprit_ranks = {r};
    d_.entered_ranks = entered_;
    d_.missing_ranks = missing_;
    const bool partial_frontier = !entered_.empty() && !missing_.empty();
    int64_t seq =
        v.last_started > v.last_completed ? v.last_started : (partial_frontier ? frontier_ : -1);
    if (seq < 0 && v.has_progress && frontier_ >= 0 && !entered_.empty()) seq = frontier_;
    // Its own record died with it; the others show where the job was.
    const bool others_only = seq < 0 && !v.has_progress && frontier_ >= 0 && !entered_.empty();
    if (others_only) seq = frontier_;
    d_.seq = seq;
    std::string where;
    if (others_only) {
      FillCollective(seq);
      where = " while " + Plural(entered_) + " were inside " + CollectiveLabel(seq) +
              " (its flight recorder was lost with it)";
    } else if (seq >= 0) {
      FillCollective(seq);
      where = (v.last_started >= seq ? " inside " : " before entering ") + CollectiveLabel(seq) +
              " (last completed #" + std::to_string(v.last_completed) + ")";
    } else if (v.has_progress) {
      where = " (last completed collective #" + std::to_string(v.last_completed) + ")";
    }
    d_.headline = "FAILURE: rank " + std::to_string(r) + " " + v.failure;
    if (v.failed_at_ms > 0) d_.headline += " at " + FormatUnixMs(v.failed_at_ms);
    d_.headline += where;
    if (seq >= 0) {
      std::vector<int> waiting;
      for (int e : entered_) {
        if (e != r && !facts_[e].exited) waiting.push_back(e);
      }
      if (!waiting.empty()) d_.headline += "; " + Plural(waiting) + " left waiting in it";
    }
    // torchrun's "Root Cause (first observed failure)" block.
    d_.details.push_back("Root Cause (first observed failure):");
    d_.details.push_back("  time      : " + FormatUnixMs(v.failed_at_ms));
    if (v.record->summary) d_.details.push_back("  host      : " + v.record->summary->host);
    d_.details.push_back("  rank      : " + std::to_string(r));
    if (v.record->summary) {
      d_.details.push_back("  exitcode  : " + std::to_string(v.record->summary->exit_code) +
                           " (pid: " + std::to_string(v.record->summary->pid) + ")" +
                           (v.signal ? " signal " + SignalName(v.signal) : ""));
    }
    if (v.record->error) {
      d_.details.push_back("  error_file: rank" + std::to_string(r) + "/error.json");
      std::string message = JsonString(*v.record->error, "message");
      if (!message.empty()) d_.details.push_back("  message   : " + message);
    }
    if (!v.record->stderr_tail.empty()) {
      d_.details.push_back("  last stderr lines of rank " + std::to_string(r) + ":");
      for (const std::string& line : v.record->stderr_tail) d_.details.push_back("    " + line);
    }
    if (v.oom) {
      std::string trend = MemoryTrend(*v.record);
      d_.details.push_back(trend.empty() ? "no memory telemetry in rank" + std::to_string(r) +
                                               "/events.jsonl to show a trend"
                                         : trend);
    }
  }

  // Ranks the collective watchdogs named as missing from the frontier collective ("timeout"
  // events and error.json): they compared progress markers before giving up.
  std::vector<int> ReportedMissing() const {
    std::set<int> ranks;
    auto take = [&](const nlohmann::json& body) {
      if (JsonInt(body, "seq", frontier_) != frontier_) return;
      auto it = body.find("missing_ranks");
      if (it == body.end() || !it->is_array()) return;
      for (const auto& r : *it) {
        if (r.is_number_integer() && r.get<int>() >= 0 &&
            r.get<int>() < static_cast<int>(facts_.size())) {
          ranks.insert(r.get<int>());
        }
      }
    };
    for (const RankFacts& v : facts_) {
      for (const RankEvent& e : v.record->events) {
        if (e.kind == "timeout") take(e.body);
      }
      if (v.record->error && JsonString(*v.record->error, "kind") == "timeout")
        take(*v.record->error);
    }
    return {ranks.begin(), ranks.end()};
  }

  // Whether some rank's flight.json answered a dump request: then a rank that left none did not
  // answer, which is evidence, not just a teardown that came first.
  bool DumpWasRequested() const {
    for (const RankRecord& rec : run_.ranks) {
      if (rec.flight.valid && rec.flight.reason == "request") return true;
    }
    return false;
  }

  // Culprits of a hang, strongest evidence first.
  std::vector<int> HangCulprits() const {
    if (!missing_.empty()) return missing_;
    std::vector<int> culprits = ReportedMissing();
    if (!culprits.empty()) return culprits;
    for (const RankFacts& v : facts_) {
      if (v.has_progress && v.unresponsive) culprits.push_back(v.record->rank);
    }
    if (!culprits.empty()) return culprits;
    // A rank that is gone while the others wait cannot ever join them.
    for (const RankFacts& v : facts_) {
      const bool consequence =
          TornDown(v) || (v.record->summary && v.exit_code == kWatchdogExitCode);
      if (v.exited && !consequence && v.has_progress && v.last_completed < frontier_) {
        culprits.push_back(v.record->rank);
      }
    }
    if (!culprits.empty()) return culprits;
    if (!unknown_.empty() && !entered_.empty()) {
      // The others dumped their flight recorders; a rank that left none although it was asked
      // (or is still there) is the silent one. A rank the launcher tore down first says nothing.
      const bool asked = DumpWasRequested() || options_.now_unix_ms > 0;
      for (int r : unknown_) {
        if (asked || (!facts_[r].exited && facts_[r].record->dir_present)) culprits.push_back(r);
      }
      if (!culprits.empty()) return culprits;
      // Weaker: the others wait in a collective while its telemetry shows it doing something else.
      for (int r : unknown_) {
        const std::string& phase = facts_[r].phase;
        if (!phase.empty() && phase != "communication") culprits.push_back(r);
      }
      return culprits;
    }
    if (entered_.empty()) {
      // Nobody is in a collective: the rank whose activity stopped first holds the others.
      int64_t oldest = INT64_MAX;
      for (const RankFacts& v : facts_) {
        if (!v.exited && v.last_activity_ms > 0) oldest = std::min(oldest, v.last_activity_ms);
      }
      for (const RankFacts& v : facts_) {
        if (!v.exited && v.last_activity_ms == oldest) culprits.push_back(v.record->rank);
      }
    }
    return culprits;
  }

  std::string WhyCulprit(int rank) const {
    const RankFacts& v = facts_[rank];
    std::string why;
    if (v.unresponsive) {
      why = v.unresponsive_why;
      if (stale_.count(rank)) {
        why += " (its last heartbeat: completed #" + std::to_string(v.last_completed) + ")";
      }
    } else if (const std::vector<int> reported = ReportedMissing();
               !v.has_progress &&
               std::find(reported.begin(), reported.end(), rank) != reported.end()) {
      why = "never entered (named missing by the collective watchdog)";
    } else if (!v.has_progress) {
      why = "left no flight recorder dump";
    } else if (v.exited) {
      why = (v.exit_code >= 0 ? "exited with code " + std::to_string(v.exit_code) : "exited") +
            " while the others wait (last completed #" + std::to_string(v.last_completed) + ")";
    }
    if (!v.has_progress && !v.phase.empty()) {
      why += " (last telemetry: step " + std::to_string(v.step) + ", " + PhaseFor(v) + ")";
    }
    return why;
  }

  void DescribeHang() {
    d_.kind = DiagnosisKind::kHang;
    d_.seq = frontier_;
    d_.entered_ranks = entered_;
    d_.missing_ranks = missing_;
    FillCollective(frontier_);
    d_.culprit_ranks = HangCulprits();
    if (!unknown_.empty()) {
      d_.details.push_back("no flight recorder or heartbeat from " + Plural(unknown_) +
                           " (torn down before dumping, or not linked with libdlaunch)");
    }
    if (entered_.empty()) {
      d_.headline = frontier_ == 0
                        ? std::string("HANG before the first collective")
                        : "HANG between collectives: every rank completed #" +
                              std::to_string(frontier_ - 1) + " and none entered another";
      for (int c : d_.culprit_ranks)
        d_.headline += "; rank " + std::to_string(c) + " quiet longest";
      return;
    }
    std::vector<int> waiting, done;
    for (int e : entered_) (facts_[e].last_completed >= frontier_ ? done : waiting).push_back(e);
    d_.headline = "HANG at " + CollectiveLabel(frontier_) + ": ";
    if (!waiting.empty()) {
      d_.headline += Plural(waiting) + " waiting " + FormatDurationMs(MaxWaitingMs(waiting));
    }
    if (!done.empty()) {
      d_.headline += (waiting.empty() ? "" : ", ") + Plural(done) + " completed it";
    }
    if (missing_.empty() && unknown_.empty() && stale_.empty()) {
      d_.headline += " (all ranks entered, none completed)";
    }
    for (int m : missing_) {
      d_.headline += "; rank " + std::to_string(m) + " never entered (" + DescribeMissing(m) + ")";
    }
    for (int c : d_.culprit_ranks) {
      if (std::find(missing_.begin(), missing_.end(), c) != missing_.end()) continue;
      d_.headline += "; rank " + std::to_string(c) + " " + WhyCulprit(c);
    }
    if (d_.culprit_ranks.empty()) {
      d_.headline += "; no rank stands out (network or backend stall?)";
    }
  }

  // Programs without libdlaunch: only output, exits and stacks are known.
  void DescribeUnlinkedHang() {
    d_.kind = DiagnosisKind::kHang;
    std::vector<int> running, in_collective, elsewhere;
    for (const RankFacts& v : facts_) {
      if (!v.exited) running.push_back(v.record->rank);
      if (MainThreadStack(v.record->stacks).empty()) continue;
      (WaitsInCollective(v.record->stacks) ? in_collective : elsewhere).push_back(v.record->rank);
    }
    const bool some_exited = !running.empty() && running.size() < facts_.size();
    const bool by_stack = !some_exited && !in_collective.empty() && !elsewhere.empty();
    std::vector<int> culprits;
    std::string what;
    if (some_exited) {
      culprits = running;
      what = " still running after the others exited";
    } else if (by_stack) {
      // The others wait inside a collective; the odd stacks out are what they wait for.
      culprits = elsewhere;
      what = " not in the collective " + Plural(in_collective) +
             (in_collective.size() == 1 ? " waits" : " wait") + " in";
      d_.details.push_back("stacks: " + Plural(in_collective) + " wait inside a collective, " +
                           Plural(elsewhere) + " elsewhere");
    } else if (std::vector<int> odd = OddStacksOut(); !odd.empty()) {
      culprits = odd;
      int other = 0;
      while (std::find(odd.begin(), odd.end(), other) != odd.end()) ++other;
      what = std::string(odd.size() == 1 ? " stands" : " stand") + " apart by the stack (" +
             StackClass(facts_[odd.front()].record->stacks) + " while the others " +
             StackClass(facts_[other].record->stacks) + ")";
    } else {
      int64_t oldest = INT64_MAX;
      for (const RankFacts& v : facts_) oldest = std::min(oldest, v.last_activity_ms);
      for (const RankFacts& v : facts_) {
        if (v.last_activity_ms == oldest) culprits.push_back(v.record->rank);
      }
      if (culprits.size() == facts_.size()) culprits.clear();
      what = " silent longest";
    }
    d_.culprit_ranks = culprits;
    if (culprits.empty()) {
      d_.headline = "HANG: no output from " + Plural(running) + "; no rank stands out";
    } else {
      int64_t quiet = -1;
      for (int c : culprits) {
        const RankFacts& v = facts_[c];
        if (v.last_activity_ms > 0 && v.ref_ms > 0) {
          quiet = std::max(quiet, v.ref_ms - v.last_activity_ms);
        }
      }
      d_.headline = "HANG: " + Plural(culprits) + what;
      if (quiet >= 0) d_.headline += " (no output for " + FormatDurationMs(quiet) + ")";
    }
    d_.headline += "; no flight recorder (program not linked with libdlaunch): see stacks.txt";
  }

  // Ranks outside the largest group of main-thread stack classes, when that group is unique and
  // every rank has a stack: the ones not doing what everybody else does.
  std::vector<int> OddStacksOut() const {
    std::map<std::string, std::vector<int>> groups;
    for (const RankFacts& v : facts_) {
      const std::string cls = StackClass(v.record->stacks);
      if (cls.empty()) return {};
      groups[cls].push_back(v.record->rank);
    }
    if (groups.size() < 2) return {};
    size_t largest = 0, count = 0;
    for (const auto& [cls, ranks] : groups) largest = std::max(largest, ranks.size());
    for (const auto& [cls, ranks] : groups) count += ranks.size() == largest;
    if (count != 1) return {};
    std::vector<int> odd;
    for (const auto& [cls, ranks] : groups) {
      if (ranks.size() != largest) odd.insert(odd.end(), ranks.begin(), ranks.end());
    }
    std::sort(odd.begin(), odd.end());
    return odd;
  }

  void WriteRankLines() {
    std::set<int> culprits(d_.culprit_ranks.begin(), d_.culprit_ranks.end());
    for (const RankFacts& v : facts_)
      d_.ranks.push_back(RankLine(v, culprits.count(v.record->rank) > 0));
  }

  RankDiagnosis RankLine(const RankFacts& v, bool culprit) const {
    const RankRecord& rec = *v.record;
    RankDiagnosis rd;
    rd.rank = rec.rank;
    rd.culprit = culprit;
    rd.last_completed_seq = v.last_completed;
    rd.last_started_seq = v.last_started;
    rd.phase = v.phase;
    rd.phase_for_ms =
        (v.phase_since_ms > 0 && v.ref_ms >= v.phase_since_ms) ? v.ref_ms - v.phase_since_ms : -1;
    rd.step = v.step;
    rd.rss_bytes = v.rss;
    rd.device_allocated_bytes = v.device_allocated;
    rd.device_reserved_bytes = v.device_reserved;
    rd.exit_code = v.exited ? v.exit_code : -1;
    rd.signal = v.signal;
    rd.process_state = rec.process_state;
    rd.stack_top = StackTop(rec.stacks);
    rd.nccl_warnings = rec.nccl_warnings;
    rd.waiting_ms = WaitingMs(rec.rank);
    const int64_t seq = d_.seq;
    const bool stopped = !rec.process_state.empty() && rec.process_state[0] == 'T';
    // Where the rank stood relative to the collective in question comes first; how it ended
    // (failed, exited, torn down) is reported beside it.
    if (v.failed) {
      rd.state = "failed";
    } else if (stale_.count(rec.rank)) {
      rd.state = stopped ? "stopped" : "unresponsive";
    } else if (seq >= 0 && v.has_progress) {
      rd.state = v.last_completed >= seq ? "completed"
                 : v.last_started >= seq ? "waiting"
                                         : "never_entered";
      if (stopped) rd.state += ",stopped";
    } else if (v.exited) {
      rd.state = "exited";
    } else if (stopped) {
      rd.state = "stopped";
    } else {
      rd.state = v.has_progress || rec.dir_present || rec.live ? "running" : "unknown";
    }

    std::string ending;
    if (v.failed) {
      ending = v.failure;
    } else if (v.exited) {
      ending = v.signal ? "killed by " + SignalName(v.signal)
                        : "exited with code " + std::to_string(v.exit_code);
      if (v.exit_code == kWatchdogExitCode && !v.signal) {
        ending += " (its collective watchdog fired)";
      }
      if (TornDown(v)) ending += " (torn down by the launcher)";
    }
    std::ostringstream line;
    line << "rank " << rec.rank << (culprit ? " [culprit]" : "") << ": ";
    if (rd.state.rfind("waiting", 0) == 0) {
      line << "waiting in #" << seq;
      if (rd.waiting_ms >= 0) line << " for " << FormatDurationMs(rd.waiting_ms);
    } else if (rd.state.rfind("never_entered", 0) == 0) {
      line << "never entered #" << seq;
    } else if (rd.state.rfind("completed", 0) == 0) {
      line << "completed #" << seq;
    } else if (stale_.count(rec.rank)) {
      line << "not responding (below: its last heartbeat)";
    } else if (!ending.empty()) {
      line << ending;
      ending.clear();
    } else if (!v.has_progress) {
      line << (rec.dir_present || rec.live ? "no flight recorder or heartbeat"
                                           : "no data (rank folder missing)");
    } else {
      line << rd.state;
    }
    if (!ending.empty()) line << "; then " << ending;
    if (v.has_progress) {
      line << "; last completed #" << v.last_completed;
      if (v.last_started > v.last_completed) line << ", last started #" << v.last_started;
    }
    if (!v.phase.empty()) line << "; " << PhaseFor(v);
    if (v.step >= 0) line << "; step " << v.step;
    if (v.rss >= 0) line << "; rss " << FormatBytes(v.rss);
    if (v.device_allocated >= 0) line << "; device " << FormatBytes(v.device_allocated);
    if (v.unresponsive) {
      line << "; " << v.unresponsive_why;
    } else if (!rec.process_state.empty()) {
      line << "; process " << rec.process_state;
    }
    if (!v.has_progress && v.last_activity_ms > 0 && v.ref_ms > 0 && !v.exited) {
      line << "; last output " << FormatDurationMs(v.ref_ms - v.last_activity_ms) << " ago";
    }
    if (!rd.stack_top.empty()) line << "; stack: " << rd.stack_top;
    rd.line = line.str();
    return rd;
  }

  const RunSnapshot& run_;
  const AnalyzeOptions& options_;
  Diagnosis d_;
  std::vector<RankFacts> facts_;  // index == rank
  // FindMismatch
  int64_t mismatch_seq_ = -1;
  std::vector<int> mismatch_culprits_;
  std::map<Signature, std::vector<int>> mismatch_groups_;
  std::map<int, const FlightEntry*> mismatch_entries_;
  // FindFrontier
  bool any_progress_ = false;
  int64_t frontier_ = -1;
  std::vector<int> entered_, missing_, unknown_;
  std::set<int> stale_;  // unresponsive, last heartbeat too old to place
  std::map<int, const FlightEntry*> frontier_entries_;
  // FindRootCause
  const RankFacts* root_ = nullptr;
};

}  // namespace

const char* DiagnosisKindName(DiagnosisKind kind) {
  switch (kind) {
    case DiagnosisKind::kOk:
      return "ok";
    case DiagnosisKind::kHang:
      return "hang";
    case DiagnosisKind::kFailure:
      return "failure";
    case DiagnosisKind::kMismatch:
      return "mismatch";
    case DiagnosisKind::kIncomplete:
      return "incomplete";
  }
  return "incomplete";
}

Diagnosis Analyze(const RunSnapshot& run, const AnalyzeOptions& options) {
  return Analysis(run, options).Run();
}

Diagnosis AnalyzeRunDir(const std::string& run_dir, int world_size_hint) {
  RunSnapshot run;
  try {
    run = LoadRunDir(run_dir, world_size_hint);
  } catch (const Error& e) {
    Diagnosis d;
    d.run_dir = run_dir;
    d.headline = std::string("INCOMPLETE: ") + e.what();
    d.problems.push_back(e.what());
    return d;
  }
  Diagnosis d = Analyze(run);
  d.nccl_verdicts = nccl_log::FindVerdicts(nccl_log::ParseRankDirs(run_dir), {});
  WriteReportFiles(run, &d, run_dir);
  return d;
}

void WriteReportFiles(const RunSnapshot& run, Diagnosis* diagnosis, const std::string& run_dir) {
  try {
    WriteDiagnosisFiles(*diagnosis, run_dir);
    WriteTrace(run, diagnosis, run_dir + "/trace.json");
  } catch (const Error& e) {
    diagnosis->problems.push_back(e.what());
  }
}

}  // namespace dlaunch::launcher
