// The facts layer of the analysis: what is known about one rank, merged from every source (flight
// recorder, telemetry, events, error.json, summary.json, the live heartbeat, stacks), as plain
// data. Inference (inference.h) reads only these facts, so any source that can fill them — a
// Python rank writing the same files, NCCL log verdicts, Python stacks — feeds the same analysis
// through a FactsEnricher without touching inference.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/diagnose/run_snapshot.h"
#include "launcher/diagnose/stack_parser.h"

namespace dlaunch::launcher {

// Where a root-cause candidate's failure was learnt.
enum class FailureSource {
  kNone,
  kExit,   // a bad exit code or a signal (not a teardown, not a watchdog's exit)
  kError,  // error.json or an "error" event
  kOom,    // error.json or an "oom" event of kind oom: beats every other message
  kNan,    // error.json or a "nan" event: the loss became NaN or inf; a cause like an OOM
};

struct RankFailure {
  FailureSource source = FailureSource::kNone;
  int64_t at_unix_ms = 0;
  std::string message;  // the rank's own words (kError, kOom)
  // The bad exit, also beside an error message: counted only when not a teardown or watchdog.
  bool bad_exit = false;
  int exit_code = 0;
  int signal = 0;
  std::string launcher_error;  // summary.json's error of this rank
  bool consequence = false;    // the message reads as fallout of another rank's (peer gone)
  // SIGKILL with a sign of memory pressure ("its RSS was 7.1 GiB of the host's 8 GiB"); "" when
  // nothing points at the OOM killer (a rank may kill itself, or be killed by hand).
  std::string memory_pressure;
};

// Which evidence gave a rank's last completed seq. Live and offline read the same evidence in the
// same order of trust: the heartbeat (the rank's own count as it beats: the launcher's stream
// live, heartbeat.json offline), the flight tail (flight_tail.jsonl, rewritten at every change of
// an entry), flight.json (written now and then, and on request). The newest seq wins; among
// sources that say the same, the more trusted one is named.
enum class ProgressSource { kNone, kHeartbeat, kFlightTail, kFlightJson };
// "" | heartbeat | flight_tail | flight (diagnosis.json's progress_from)
const char* ProgressSourceName(ProgressSource source);

// A collective watchdog's claim: at `seq` (nullopt: unsaid) these ranks never joined.
struct TimeoutClaim {
  std::optional<int64_t> seq;
  std::vector<int> missing_ranks;
};

struct RankFacts {
  int rank = 0;
  const RankRecord* record = nullptr;  // the evidence, for rendering
  bool dir_present = false;
  bool live = false;    // seen by a live monitor
  bool linked = false;  // has a heartbeat stream

  // Progress through collectives (flight recorder or heartbeat).
  const FlightDump* flight = nullptr;  // null without a readable flight.json
  bool has_progress = false;
  int64_t last_completed = -1;
  int64_t last_started = -1;
  ProgressSource progress_from = ProgressSource::kNone;  // of last_completed
  std::string current_op;                                // the heartbeat's, live only
  // This rank's "now": the clock in a live diagnosis; offline the latest time its records hold
  // (flight dump, telemetry, events, error.json, heartbeat.json, summary end), or the run's when
  // no exit of it was recorded (ReferToTheRecordedEnd); never a file's time.
  int64_t ref_ms = 0;

  // Activity (telemetry, heartbeat, output).
  const std::vector<TelemetrySample>* telemetry = nullptr;
  std::string phase;
  int64_t phase_since_ms = 0;
  int64_t step = -1;
  rundir::MemoryFigures memory;  // the last telemetry line's, then the live heartbeat's
  // Telemetry, and live the output the launcher saw: for programs without a flight recorder.
  int64_t last_activity_ms = 0;

  // How it ended.
  bool exited = false;
  int exit_code = -1;
  int signal = 0;
  bool torn_down = false;  // "killed" in summary.json: the launcher's teardown
  // summary.json says running, yet its pid is gone from this host: the launcher died (SIGKILL)
  // before it recorded the rank's exit. Offline only.
  bool vanished = false;
  bool watchdog_exit = false;  // exit code kExitHang: its own collective watchdog fired
  RankFailure failure;
  bool failed() const { return failure.source != FailureSource::kNone; }

  // Liveness, live only.
  bool missed_dump = false;       // linked, alive, and did not answer the dump request
  int64_t heartbeat_age_ms = -1;  // at the diagnosis, when known
  bool stopped = false;           // process state T
  std::string process_state;
  bool unresponsive() const { return missed_dump || stopped; }

  // What its collective watchdog and error files said about a hang.
  bool reported_timeout = false;
  std::vector<TimeoutClaim> timeout_claims;

  // Its node was lost (multi-node): what its node last said of it is no evidence.
  int lost_node = -1;
  std::string lost_node_label;  // "node 1 (host)"
  // Gloo aborted it because a peer sent more bytes than it expected (python_evidence.h): the
  // healthy side of a size mismatch.
  int64_t peer_sent_bytes = -1, peer_expected_bytes = -1;
  bool aborted_by_peer_size() const { return peer_sent_bytes >= 0; }

  StackSummary stack;
  std::vector<std::string> nccl_warnings;
  // Evidence lines attached by enrichers, shown with the report.
  std::vector<std::string> notes;
};

struct FactsOptions {
  int64_t now_unix_ms = 0;  // 0 offline
};

// Facts of one rank from its record. Never throws.
RankFacts GatherFacts(const RankRecord& record, const FactsOptions& options);

// Adds or corrects facts from another source after GatherFacts (e.g. Python stacks, NCCL log
// verdicts). Called once per rank, in order.
using FactsEnricher = std::function<void(const RankRecord& record, RankFacts& facts)>;

// Messages that describe losing a peer or waiting for one: errors caused by another rank.
bool IsFallout(const std::string& message);

// How strongly a failure claims to be the root cause: a rank's own out-of-memory or non-finite
// loss explains what follows it; then its own error or bad exit; then an error that reads as
// losing a peer.
enum class FailureWeight { kCause, kOwn, kFallout };
FailureWeight WeightOf(const RankFailure& failure);

// The root cause among `facts`: the strongest failure, then the earliest (unknown times last),
// then the lowest rank; -1 when none failed. Fallout does not count once a rank's collective
// watchdog fired (FirstWatchdogExit): the job hung, and losing a peer followed from it. The
// launcher's root-cause block and the diagnosis both choose through this over the same facts
// (GatherRunFacts, analyzer.h), so they name the same rank.
int PickRootCause(const std::vector<RankFacts>& facts);

// The rank that exited first (summary.json's end; unknown last) with exit code 3 after its own
// collective watchdog fired; -1 when none did.
int FirstWatchdogExit(const std::vector<RankFacts>& facts);

// When the run's records say it ended, the "now" of an offline diagnosis: the latest of
// run.ended_unix_ms and every rank's ref_ms (its own latest record); 0 when nothing recorded a
// time. Never a file's modification time nor the clock, so that a copied run directory, read at
// any later moment, gives the same durations.
int64_t RecordedEndUnixMs(const RunSnapshot& run, const std::vector<RankFacts>& facts);

// Offline: every rank with no recorded exit takes RecordedEndUnixMs as its "now" (ref_ms).
void ReferToTheRecordedEnd(const RunSnapshot& run, std::vector<RankFacts>& facts);

// Ranks of the nodes summary.json calls lost: they are "lost with node N", whatever their node
// last reported of them (a dead node's last word on a rank is not its exit).
void MarkLostNodes(const RunSnapshot& run, std::vector<RankFacts>& facts);

}  // namespace dlaunch::launcher
