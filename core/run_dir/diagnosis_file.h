// diagnosis.json and diagnosis.txt: the answer to "which rank is stuck, in which collective,
// doing what?" (or "why did it die?"), written by the launcher's hang monitor while a job runs,
// after a failed attempt, and by `dlaunch diagnose`. diagnosis.txt is the same report for people.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/run_dir/flight_file.h"
#include "core/run_dir/memory_figures.h"
#include "core/run_dir/paths.h"
#include "core/run_dir/straggler_verdicts.h"

namespace dlaunch::rundir {

inline constexpr char kDiagnosisSchema[] = "diagnosis";
inline constexpr size_t kMaxDiagnosisBytes = 64 << 20;

enum class DiagnosisKind { kOk, kHang, kFailure, kMismatch, kIncomplete };
const char* DiagnosisKindName(DiagnosisKind kind);  // ok | hang | failure | mismatch | incomplete
DiagnosisKind ParseDiagnosisKind(std::string_view name);  // kIncomplete for anything else

// How ranks disagreed about one collective; named as PyTorch's flight-recorder analyzer names
// the same findings (its MatchState), so people who know one know the other.
enum class MismatchKind { kNone, kCollectiveType, kDtype, kSizeOrSyntax };
// "" | COLLECTIVE_TYPE_MISMATCH | COLLECTIVE_DTYPE_MISMATCH | SIZE_OR_SYNTAX_MISMATCH
const char* MismatchKindName(MismatchKind kind);
MismatchKind ParseMismatchKind(std::string_view name);

// Where a hang stands.
enum class HangKind {
  kNone,
  kInCollective,        // some ranks inside a collective the others did not complete
  kBetweenCollectives,  // every rank completed the same collective, none entered another
  kBeforeFirst,         // no rank completed any collective
  kNoFlightRecorder,    // ranks without libdlaunch: judged by output, exits and stacks
};
// "" | in_collective | between_collectives | before_first | no_flight_recorder
const char* HangKindName(HangKind kind);
HangKind ParseHangKind(std::string_view name);

// Where one rank stood relative to the collective in question, or how it ended.
enum class RankState {
  kUnknown,       // no data at all
  kRunning,       // alive, not placed relative to a collective
  kWaiting,       // inside the collective
  kNeverEntered,  // has not reached it
  kCompleted,     // got through it
  kExited,
  kFailed,        // a root-cause candidate
  kStopped,       // SIGSTOPped (process state T)
  kUnresponsive,  // linked, but its last heartbeat is too old to place it
};
// unknown | running | waiting | never_entered | completed | exited | failed | stopped |
// unresponsive
const char* RankStateName(RankState state);
RankState ParseRankState(std::string_view name);

// The rank's last memory figures (telemetry, heartbeat) are flat in the file, as in the struct.
struct RankDiagnosis : MemoryFigures {
  int rank = 0;
  bool culprit = false;
  RankState state = RankState::kUnknown;
  // The process is stopped as well (written "waiting,stopped", "completed,stopped", ...).
  bool stopped = false;
  int64_t last_completed_seq = -1;
  int64_t last_started_seq = -1;
  // Which evidence gave last_completed_seq, live and offline alike: heartbeat | flight_tail |
  // flight (flight.json); "" when none did.
  std::string progress_from;
  int64_t waiting_ms = -1;  // time inside the collective at `Diagnosis::seq`, -1 when not in it
  std::string phase;
  int64_t phase_for_ms = -1;
  int64_t step = -1;
  int exit_code = -1;  // -1 while running or unknown
  int signal = 0;
  std::string process_state;
  std::string stack_top;  // innermost interesting frames of the main thread, when captured
  std::vector<std::string> nccl_warnings;
  std::string line;  // human-readable summary of the above

  std::string StateText() const;  // "waiting", "never_entered,stopped"
};

// Evidence the diagnosis found but did not read, or left out of diagnosis.json, and why: a torch
// flight-recorder dump past the reading limits, one that could not be decoded. At most
// kMaxSkippedEvidence are named; `count` counts them all.
struct SkippedEvidence {
  std::string file;  // as in problem lines: "rank3/torch_trace_3"
  std::string reason;
};
inline constexpr size_t kMaxSkippedEvidence = 256;
struct SkippedList {
  std::vector<SkippedEvidence> files;
  int64_t count = 0;
  void Add(SkippedEvidence skipped);
  // "7 files (rank0/torch_trace_0: why; rank0/torch_trace_1: why; ... and 4 more)", the first
  // three named; "" when none.
  std::string Line() const;
};

struct Diagnosis {
  DiagnosisKind kind = DiagnosisKind::kIncomplete;
  HangKind hang_kind = HangKind::kNone;
  std::string headline;
  std::string trigger;  // why a live diagnosis ran, e.g. "no progress for 300 s on rank 2"
  std::vector<int> culprit_ranks;
  int64_t seq = -1;  // the lowest collective not completed everywhere (or the mismatched one)
  std::string op;
  std::string dtype;
  int64_t count = -1;
  int64_t bytes = -1;
  MismatchKind mismatch = MismatchKind::kNone;
  // A hang matched in one process group of several (a data- x tensor-parallel mesh): the group of
  // the waiting rank's call, its members, and the call's index among the group's calls; `seq` is
  // the waiting rank's own. "", [] and -1 when ranks were matched by seq.
  std::string pg;
  std::string pg_desc;  // torch's description of the group ("mesh_tp"), "" when none
  std::vector<int> pg_ranks;
  int64_t pg_seq = -1;
  std::vector<int> entered_ranks;
  std::vector<int> missing_ranks;  // never entered `seq`
  std::vector<RankDiagnosis> ranks;
  std::vector<std::string> details;   // root-cause block, memory trend, mismatch table, ...
  std::vector<std::string> problems;  // inputs that were missing or unreadable
  // The NCCL log analysis' verdicts (launcher/nccl_log's VerdictToJson), an array.
  nlohmann::json nccl_verdicts = nlohmann::json::array();
  // PyTorch's own flight-recorder dumps and what comparing them across ranks found (an object:
  // {"dumps": [...], "findings": [...]}), empty when no rank left one.
  nlohmann::json torch_flight = nlohmann::json::object();
  SkippedList skipped_evidence;
  // The straggler verdicts of the run (summary.json's "stragglers"), active and ended.
  std::vector<StragglerVerdict> stragglers;
  std::string run_dir;
  int64_t created_unix_ms = 0;
};

nlohmann::json DiagnosisToJson(const Diagnosis& diagnosis);
// Lenient: whatever fields are there and well-typed.
Diagnosis DiagnosisFromJson(const nlohmann::json& doc);

// diagnosis.txt (`text`, rendered by the caller) and diagnosis.json, each atomically. Blocks for
// the writes; throws Error(kInternal) naming the file that failed.
void WriteDiagnosis(const RunDir& dir, const Diagnosis& diagnosis, const std::string& text);
FileState ReadDiagnosis(const std::string& path, const std::string& label, Diagnosis* out,
                        std::vector<std::string>* problems);

}  // namespace dlaunch::rundir
