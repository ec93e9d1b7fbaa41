// Every text form of a diagnosis (console and diagnosis.txt) but the mismatch's wording
// (render_mismatch.h), so that they stay worded alike.
#include "launcher/diagnose/render_text.h"

#include <algorithm>
#include <climits>
#include <set>
#include <sstream>

#include "core/base/format.h"
#include "launcher/diagnose/diagnosis.h"
#include "launcher/diagnose/render_mismatch.h"

namespace dlaunch::launcher {
namespace {

using base::FormatBytes;
using base::FormatDurationMs;
using base::FormatUnixMs;
using base::NameRanks;
using base::SignalName;

// "last completed #4", or "no collective completed yet" before the first.
std::string LastCompleted(int64_t seq) {
  return seq < 0 ? "no collective completed yet" : "last completed #" + std::to_string(seq);
}

// "the default group", "group 1".
std::string GroupName(const std::string& pg) {
  return pg == "0" ? "the default group" : "group " + pg;
}

// "group mesh_tp {2,3}" (torch's description, else the group's name), "the default group".
std::string GroupText(const GroupCollective& g) {
  if (g.pg == "0") return GroupName(g.pg);
  return "group " + (g.desc.empty() ? g.pg : g.desc) + " {" + base::FormatRankList(g.ranks) + "}";
}

// "exited with code 1", "was killed by SIGKILL (...)", "ran out of memory: ... (exited ...)".
std::string DescribeFailure(const RankFailure& f) {
  std::string exit;
  if (f.bad_exit) {
    if (f.signal != 0) {
      exit = "was killed by " + SignalName(f.signal);
      if (f.signal == 9 && !f.memory_pressure.empty()) {
        exit += " (" + f.memory_pressure + ": host out of memory? check dmesg for the OOM killer)";
      }
    } else {
      exit = "exited with code " + std::to_string(f.exit_code);
    }
    if (!f.launcher_error.empty()) exit += ": " + f.launcher_error;
  }
  if (f.source == FailureSource::kExit) return exit;
  std::string what = f.source == FailureSource::kOom   ? "ran out of memory"
                     : f.source == FailureSource::kNan ? "stopped on a non-finite loss"
                                                       : "reported an error";
  if (!f.message.empty()) what += ": " + f.message;
  if (!exit.empty()) what += " (" + exit + ")";
  return what;
}

// "its last heartbeat", "its flight tail", "its flight.json": where its progress was read.
std::string ProgressWords(ProgressSource source) {
  switch (source) {
    case ProgressSource::kFlightTail:
      return "its flight tail";
    case ProgressSource::kFlightJson:
      return "its flight.json";
    default:
      return "its last heartbeat";
  }
}

// "did not answer the dump request, no heartbeat for 31 s, process T (stopped)".
std::string UnresponsiveWhy(const RankFacts& v) {
  std::string why;
  if (v.missed_dump) {
    why = "did not answer the dump request";
    if (v.heartbeat_age_ms >= 0)
      why += ", no heartbeat for " + FormatDurationMs(v.heartbeat_age_ms);
  }
  if (v.stopped) why += (why.empty() ? "process " : ", process ") + v.process_state;
  return why;
}

class Renderer {
 public:
  Renderer(const std::vector<RankFacts>& facts, const Verdict& verdict, const RenderContext& ctx)
      : f_(facts), v_(verdict), ctx_(ctx) {}

  Diagnosis Run() {
    d_.run_dir = ctx_.run->run_dir;
    d_.trigger = ctx_.trigger;
    d_.problems = ctx_.run->problems;
    d_.skipped_evidence = ctx_.run->skipped_evidence;
    d_.created_unix_ms = ctx_.now_unix_ms;
    d_.kind = v_.kind;
    d_.hang_kind = v_.hang_kind;
    d_.culprit_ranks = v_.culprits;
    d_.seq = v_.seq;
    d_.op = v_.collective.op;
    d_.dtype = v_.collective.dtype;
    d_.count = v_.collective.count;
    d_.bytes = v_.collective.bytes;
    d_.mismatch = v_.mismatch.kind;
    if (v_.group.matched() && v_.seq == v_.frontier) {
      d_.pg = v_.group.pg;
      d_.pg_desc = v_.group.desc;
      d_.pg_ranks = v_.group.ranks;
      d_.pg_seq = v_.group.pg_seq;
    }
    if (f_.empty()) {
      d_.headline = "INCOMPLETE: the run directory holds no rank data";
      return d_;
    }
    if (v_.p2p_not_compared) {
      d_.details.push_back(
          "point-to-point calls in the flight recorders and no collective_seq: per-rank seqs need "
          "not line up, so collectives were not compared across ranks");
    }
    if (v_.kind == DiagnosisKind::kMismatch || v_.kind == DiagnosisKind::kFailure ||
        (v_.kind == DiagnosisKind::kHang && v_.hang_kind != HangKind::kNoFlightRecorder)) {
      d_.entered_ranks = v_.entered;
      d_.missing_ranks = v_.missing;
    }
    switch (v_.kind) {
      case DiagnosisKind::kMismatch:
        RenderMismatch(v_.mismatch, &d_);
        break;
      case DiagnosisKind::kFailure:
        Failure();
        break;
      case DiagnosisKind::kHang:
        v_.hang_kind == HangKind::kNoFlightRecorder ? HangWithoutRecorder() : Hang();
        break;
      case DiagnosisKind::kOk:
        d_.headline = "OK: all " + std::to_string(f_.size()) + " ranks exited 0";
        break;
      case DiagnosisKind::kIncomplete:
        d_.headline = "INCOMPLETE: no hang or failure can be established from what is there";
        if (ctx_.run->exit_code) {
          d_.headline += " (launcher exit code " + std::to_string(*ctx_.run->exit_code) + ")";
        }
        break;
    }
    if (!d_.problems.empty() && d_.kind != DiagnosisKind::kOk) {
      d_.headline +=
          " [partial: " + std::to_string(d_.problems.size()) + " input(s) missing or unreadable]";
    }
    if (ctx_.run->live_diagnosis && ctx_.now_unix_ms == 0 &&
        !ctx_.run->live_diagnosis->headline.empty()) {
      d_.details.push_back("diagnosis recorded while the job ran: " +
                           ctx_.run->live_diagnosis->headline);
    }
    for (const RankFacts& r : f_) {
      for (const std::string& note : r.notes) {
        d_.details.push_back("rank " + std::to_string(r.rank) + ": " + note);
      }
    }
    std::set<int> culprits(v_.culprits.begin(), v_.culprits.end());
    for (const RankFacts& r : f_) d_.ranks.push_back(RankLine(r, culprits.count(r.rank) > 0));
    return d_;
  }

 private:
  rundir::RankDir RankFiles(int rank) const { return rundir::RunDir(d_.run_dir).rank(rank); }

  std::string CollectiveLabel(int64_t seq) const {
    return "collective #" + std::to_string(seq) + " " +
           DescribeCollective(d_.op, d_.dtype, d_.count, d_.bytes);
  }

  // How long `r` had been silent by its "now" (ref_ms); -1 when unknown. Offline also when its
  // last activity is where the records end: "0 ms ago" would only say when the evidence stops,
  // not how quiet the rank was.
  int64_t SilentMs(const RankFacts& r) const {
    if (r.last_activity_ms <= 0 || r.ref_ms <= 0) return -1;
    if (ctx_.now_unix_ms == 0 && r.ref_ms <= r.last_activity_ms) return -1;
    return r.ref_ms - r.last_activity_ms;
  }

  std::string PhaseFor(const RankFacts& r) const {
    std::string out = "phase " + r.phase;
    if (r.phase_since_ms > 0 && r.ref_ms >= r.phase_since_ms) {
      out += " for " + FormatDurationMs(r.ref_ms - r.phase_since_ms);
    }
    return out;
  }

  // The job ended because a node went away: its ranks' own records end with it.
  void NodeLost() {
    const std::string& error = ctx_.run->error;
    const std::string prefix = "node " + std::to_string(v_.lost_node) + " ";
    d_.headline =
        "FAILURE: " + (error.rfind(prefix, 0) == 0 ? error : v_.lost_node_label + " lost");
    if (!v_.lost_ranks.empty()) {
      d_.headline +=
          "; " + NameRanks(v_.lost_ranks) + " lost with node " + std::to_string(v_.lost_node);
    }
    d_.details.push_back("Root Cause: " + v_.lost_node_label +
                         " went away (its launcher or machine died, or the network to it failed); "
                         "its ranks' last files are the ones its agent pushed before");
  }

  void Failure() {
    if (v_.lost_node >= 0) return NodeLost();
    const RankFacts& v = f_[v_.root];
    const RankRecord& rec = *v.record;
    const int r = v.rank;
    std::string where;
    if (v_.root_record_lost) {
      where = " while " + NameRanks(v_.entered) + " were inside " + CollectiveLabel(v_.seq) +
              " (its flight recorder was lost with it)";
    } else if (v_.seq >= 0) {
      where = (v_.root_inside ? " inside " : " before entering ") + CollectiveLabel(v_.seq) + " (" +
              LastCompleted(v.last_completed) + ")";
    } else if (v.has_progress) {
      where = v.last_completed < 0
                  ? " (no collective completed yet)"
                  : " (last completed collective #" + std::to_string(v.last_completed) + ")";
    }
    d_.headline = "FAILURE: rank " + std::to_string(r) + " " + DescribeFailure(v.failure);
    if (v.failure.at_unix_ms > 0) d_.headline += " at " + FormatUnixMs(v.failure.at_unix_ms);
    d_.headline += where;
    if (!v_.left_waiting.empty()) {
      d_.headline += "; " + NameRanks(v_.left_waiting) + " left waiting in it";
    }
    // torchrun's "Root Cause (first observed failure)" block.
    d_.details.push_back(kRootCauseHeading);
    d_.details.push_back("  time      : " + FormatUnixMs(v.failure.at_unix_ms));
    if (rec.summary) {
      // Another node's rank: which node, since several nodes may share a host name.
      const auto& node = rec.summary->node_rank;
      d_.details.push_back("  host      : " + rec.summary->host +
                           (node ? " (node " + std::to_string(*node) + ")" : ""));
    }
    d_.details.push_back("  rank      : " + std::to_string(r));
    if (rec.summary) {
      d_.details.push_back("  exitcode  : " + std::to_string(rec.summary->exit_code.value_or(0)) +
                           " (pid: " + std::to_string(rec.summary->pid) + ")" +
                           (v.signal ? " signal " + SignalName(v.signal) : ""));
    }
    if (rec.error) {
      d_.details.push_back("  error_file: " + rundir::RankFileLabel(r, RankFiles(r).error()));
      if (!rec.error->message.empty()) d_.details.push_back("  message   : " + rec.error->message);
    }
    if (!rec.stderr_tail.empty()) {
      d_.details.push_back("  last stderr lines of rank " + std::to_string(r) + ":");
      for (const std::string& line : rec.stderr_tail) d_.details.push_back("    " + line);
    }
    if (v.failure.source == FailureSource::kOom) {
      std::string trend = v.telemetry ? MemoryTrend(r, *v.telemetry) : "";
      d_.details.push_back(trend.empty() ? "no memory telemetry in " +
                                               rundir::RankFileLabel(r, RankFiles(r).events()) +
                                               " to show a trend"
                                         : trend);
    }
  }

  std::string DescribeMissing(int rank) const {
    const RankFacts& v = f_[rank];
    std::string out = LastCompleted(v.last_completed);
    if (!v.phase.empty()) out += ", " + PhaseFor(v);
    if (v.unresponsive()) out += ", " + UnresponsiveWhy(v);
    if (v.exited && !v.torn_down) {
      out += v.signal ? ", killed by " + SignalName(v.signal)
                      : (v.exit_code >= 0 ? ", exited with code " + std::to_string(v.exit_code)
                                          : ", exited");
    }
    return out;
  }

  std::string WhyCulprit(int rank, CulpritReason reason) const {
    const RankFacts& v = f_[rank];
    std::string why;
    switch (reason) {
      case CulpritReason::kUnresponsive:
        why = UnresponsiveWhy(v);
        if (v_.stale.count(rank)) {
          why += " (" + ProgressWords(v.progress_from) + ": " +
                 (v.last_completed < 0 ? std::string("no collective completed yet")
                                       : "completed #" + std::to_string(v.last_completed)) +
                 ")";
        }
        break;
      case CulpritReason::kNamedByWatchdog:
        why = "never entered (named missing by the collective watchdog)";
        break;
      case CulpritReason::kStayedBehind:
        why =
            "still in it after the others completed it (stopped, or stuck after sending its part)";
        break;
      case CulpritReason::kLeftNoRecord:
        why = "left no flight recorder dump";
        break;
      case CulpritReason::kExitedWhileWaited:
        why = (v.exit_code >= 0 ? "exited with code " + std::to_string(v.exit_code) : "exited") +
              " while the others wait (" + LastCompleted(v.last_completed) + ")";
        break;
      default:
        break;
    }
    if (!v.has_progress && !v.phase.empty()) {
      why += " (last telemetry: step " + std::to_string(v.step) + ", " + PhaseFor(v) + ")";
    }
    return why;
  }

  void Hang() {
    if (!v_.unknown.empty()) {
      d_.details.push_back("no flight recorder or heartbeat from " + NameRanks(v_.unknown) +
                           " (torn down before dumping, or not linked with libdlaunch)");
    }
    if (v_.hang_kind != HangKind::kInCollective) {
      d_.headline = v_.hang_kind == HangKind::kBeforeFirst
                        ? std::string("HANG before the first collective")
                        : "HANG between collectives: every rank completed #" +
                              std::to_string(v_.frontier - 1) + " and none entered another";
      if (v_.tie) {
        d_.headline += "; a tie: " + NameRanks(v_.culprits) + " quiet longest, within " +
                       FormatDurationMs(kTieMs) + " of each other";
      } else {
        for (int c : v_.culprits) d_.headline += "; rank " + std::to_string(c) + " quiet longest";
      }
      return;
    }
    if (!v_.deadlock.empty()) return Deadlock();
    // Matched in a process group: its members and its own count, beside the waiting rank's seq.
    d_.headline = "HANG at " + CollectiveLabel(v_.frontier);
    if (v_.group.matched()) {
      d_.headline +=
          " on " + GroupText(v_.group) + " (pg_seq " + std::to_string(v_.group.pg_seq) + ")";
    }
    d_.headline += ": ";
    if (!v_.waiting.empty()) {
      int64_t wait = -1;
      for (int r : v_.waiting) wait = std::max(wait, v_.places[r].waiting_ms);
      d_.headline += NameRanks(v_.waiting) + " waiting " + FormatDurationMs(wait);
    }
    if (!v_.done.empty()) {
      d_.headline += (v_.waiting.empty() ? "" : ", ") + NameRanks(v_.done) + " completed it";
    }
    if (v_.done.empty() && v_.missing.empty() && v_.unknown.empty() && v_.stale.empty()) {
      d_.headline += " (all ranks entered, none completed)";
    }
    for (int m : v_.missing) {
      d_.headline += "; rank " + std::to_string(m) + " never entered (" + DescribeMissing(m) + ")";
    }
    for (int c : v_.culprits) {
      if (std::find(v_.missing.begin(), v_.missing.end(), c) != v_.missing.end()) continue;
      d_.headline += "; rank " + std::to_string(c) + " " + WhyCulprit(c, v_.culprit_reasons.at(c));
    }
    if (v_.culprits.empty()) d_.headline += "; no rank stands out (network or backend stall?)";
  }

  // "deadlock: rank 0 waits in allreduce on group 1 (seq 0) at f.py:9 while rank 1 waits in
  // allreduce on the default group (seq 2) at f.py:11; the ranks call these groups in different
  // orders".
  void Deadlock() {
    std::string waits;
    for (const GroupWait& w : v_.deadlock) {
      waits += std::string(waits.empty() ? "" : " while ") + "rank " + std::to_string(w.rank) +
               " waits in " + w.op + " on " + GroupName(w.pg) + " (seq " +
               std::to_string(w.pg_seq) + ")" + (w.call_site.empty() ? "" : " at " + w.call_site);
    }
    d_.headline = "HANG: deadlock: " + waits + "; the ranks call these groups in different orders";
    d_.details.push_back(
        "each rank waits in a collective of one process group while its peers wait in another "
        "group's; every rank must call the collectives of the groups it shares in the same order");
  }

  // Programs without libdlaunch: only output, exits and stacks are known.
  void HangWithoutRecorder() {
    std::string what;
    switch (v_.unlinked) {
      case UnlinkedJudgement::kStillRunning:
        what = " still running after the others exited";
        break;
      case UnlinkedJudgement::kOutsideCollective:
        what = " not in the collective " + NameRanks(v_.in_collective) +
               (v_.in_collective.size() == 1 ? " waits" : " wait") + " in";
        d_.details.push_back("stacks: " + NameRanks(v_.in_collective) +
                             " wait inside a collective, " + NameRanks(v_.elsewhere) +
                             " elsewhere");
        break;
      case UnlinkedJudgement::kOddStackOut:
        what = std::string(v_.culprits.size() == 1 ? " stands" : " stand") +
               " apart by the stack (" + StackActivityName(v_.odd_activity) + " while the others " +
               StackActivityName(v_.usual_activity) + ")";
        break;
      case UnlinkedJudgement::kSilentLongest:
      case UnlinkedJudgement::kNone:
        what = v_.tie ? " silent longest, a tie (no stack sets them apart)" : " silent longest";
        break;
    }
    if (v_.culprits.empty()) {
      d_.headline = "HANG: no output from " + NameRanks(v_.running) + "; no rank stands out";
    } else {
      int64_t quiet = -1;
      for (int c : v_.culprits) quiet = std::max(quiet, SilentMs(f_[c]));
      d_.headline = "HANG: " + NameRanks(v_.culprits) + what;
      if (quiet >= 0) d_.headline += " (no output for " + FormatDurationMs(quiet) + ")";
    }
    d_.headline += "; no flight recorder (program not linked with libdlaunch): see " +
                   rundir::FileName(RankFiles(0).stacks());
  }

  // How `v` ended ("exited with code 1", "lost with node 1 (host)"); "" while it runs.
  static std::string Ending(const RankFacts& v) {
    std::string ending;
    if (v.lost_node >= 0) {
      ending = "lost with " + v.lost_node_label;
      if (v.failed()) ending += " (before that it " + DescribeFailure(v.failure) + ")";
    } else if (v.failed()) {
      ending = DescribeFailure(v.failure);
    } else if (v.exited) {
      ending = v.signal ? "killed by " + SignalName(v.signal)
                        : "exited with code " + std::to_string(v.exit_code);
      if (v.watchdog_exit && !v.signal) ending += " (its collective watchdog fired)";
      if (v.torn_down) ending += " (torn down by the launcher)";
    } else if (v.vanished) {
      ending = "not running; the launcher died before recording its exit";
    }
    return ending;
  }

  RankDiagnosis RankLine(const RankFacts& v, bool culprit) const {
    const RankPlace& place = v_.places[v.rank];
    RankDiagnosis rd;
    rd.rank = v.rank;
    rd.culprit = culprit;
    rd.state = place.state;
    rd.stopped = place.stopped;
    rd.last_completed_seq = v.last_completed;
    rd.last_started_seq = v.last_started;
    rd.progress_from = ProgressSourceName(v.progress_from);
    rd.phase = v.phase;
    rd.phase_for_ms =
        (v.phase_since_ms > 0 && v.ref_ms >= v.phase_since_ms) ? v.ref_ms - v.phase_since_ms : -1;
    rd.step = v.step;
    static_cast<rundir::MemoryFigures&>(rd) = v.memory;
    rd.exit_code = v.exited ? v.exit_code : -1;
    rd.signal = v.signal;
    rd.process_state = v.process_state;
    rd.stack_top = v.stack.top;
    rd.nccl_warnings = v.nccl_warnings;
    rd.waiting_ms = place.waiting_ms;
    const int64_t seq = d_.seq;
    std::string ending = Ending(v);
    std::ostringstream line;
    line << "rank " << v.rank << (culprit ? " [culprit]" : "") << ": ";
    if (place.state == RankState::kWaiting) {
      line << "waiting in #" << seq;
      if (rd.waiting_ms >= 0) line << " for " << FormatDurationMs(rd.waiting_ms);
    } else if (place.state == RankState::kNeverEntered) {
      line << "never entered #" << seq;
    } else if (place.state == RankState::kCompleted) {
      line << "completed #" << seq;
    } else if (v_.stale.count(v.rank)) {
      line << "not responding (below: " << ProgressWords(v.progress_from) << ")";
    } else if (std::find(v_.outside.begin(), v_.outside.end(), v.rank) != v_.outside.end() &&
               place.state == RankState::kRunning) {
      line << "not in " << GroupText(v_.group);
    } else if (!ending.empty()) {
      line << ending;
      ending.clear();
    } else if (!v.has_progress) {
      line << (v.dir_present || v.live ? "no flight recorder or heartbeat"
                                       : "no data (rank folder missing)");
    } else {
      line << rd.StateText();
    }
    if (!ending.empty()) line << "; then " << ending;
    if (v.has_progress) {
      line << "; " << LastCompleted(v.last_completed);
      if (v.last_started > v.last_completed) line << ", last started #" << v.last_started;
    }
    if (!v.phase.empty()) line << "; " << PhaseFor(v);
    if (v.step >= 0) line << "; step " << v.step;
    if (v.memory.rss_bytes >= 0) line << "; rss " << FormatBytes(v.memory.rss_bytes);
    if (v.memory.device_allocated_bytes >= 0) {
      line << "; device " << FormatBytes(v.memory.device_allocated_bytes);
    }
    if (v.unresponsive()) {
      line << "; " << UnresponsiveWhy(v);
    } else if (!v.process_state.empty()) {
      line << "; process " << v.process_state;
    }
    const int64_t silent = SilentMs(v);
    if (!v.has_progress && !v.exited && silent >= 0) {
      line << "; last output " << FormatDurationMs(silent) << " ago";
    }
    if (!rd.stack_top.empty()) line << "; stack: " << rd.stack_top;
    rd.line = line.str();
    return rd;
  }

  const std::vector<RankFacts>& f_;
  const Verdict& v_;
  const RenderContext& ctx_;
  Diagnosis d_;
};

}  // namespace

std::string MemoryTrend(int rank, const std::vector<TelemetrySample>& telemetry) {
  std::vector<const TelemetrySample*> device, host;
  for (const TelemetrySample& s : telemetry) {
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
  std::string out = "memory trend of rank " + std::to_string(rank) + ": " +
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

Diagnosis Render(const std::vector<RankFacts>& facts, const Verdict& verdict,
                 const RenderContext& context) {
  return Renderer(facts, verdict, context).Run();
}

}  // namespace dlaunch::launcher
