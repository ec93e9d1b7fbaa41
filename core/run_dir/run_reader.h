// Everything a run directory holds, read leniently and within bounds: a half-written, missing or
// hostile file becomes a line in `problems`, never an exception, a crash or a hang, because the
// directory is often the remains of a crash (the launcher itself may have been SIGKILLed).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/run_dir/diagnosis_file.h"
#include "core/run_dir/error_file.h"
#include "core/run_dir/events_file.h"
#include "core/run_dir/flight_file.h"
#include "core/run_dir/paths.h"
#include "core/run_dir/summary_file.h"

namespace dlaunch::rundir {

inline constexpr size_t kStderrTailLines = 8;
// Flight-recorder entries kept over all ranks: a world of thousands keeps each rank's newest
// kFlightEntryBudget / world (at least kMinFlightEntriesKept), so memory stays bounded. A hang
// is diagnosed at the frontier collectives; older entries only repeat what completed.
inline constexpr int64_t kFlightEntryBudget = 1000000;
inline constexpr int64_t kMinFlightEntriesKept = 64;

// Entries kept per rank in a world of `world` ranks: budget / world, from kMinFlightEntriesKept to
// kMaxFlightEntries (all of them up to 10 ranks at the default budget).
size_t FlightEntriesKept(int64_t world, int64_t budget = kFlightEntryBudget);

// One rank folder as read.
struct RankFiles {
  int rank = 0;
  bool dir_present = false;
  FileState flight_state = FileState::kAbsent;
  FlightDump flight;                 // meaningful when flight_state is kOk
  EventsFile events;                 // telemetry and other events
  std::optional<ErrorReport> error;  // error.json
  std::string stacks;                // stacks.txt
  std::string py_stacks;             // py_stacks.txt (Python ranks)
  std::vector<std::string> nccl_warnings;
  std::vector<std::string> stderr_tail;  // last lines of stderr.log
  // heartbeat.json's unix_ms (Python ranks' agent): the rank was alive then; 0 when absent. Only
  // times written inside the files count, never the files' own times (a copy resets those).
  int64_t heartbeat_unix_ms = 0;
  // Its collective seqs then (-1 when absent): the same evidence a live diagnosis reads from the
  // rank's heartbeats, so that offline trusts what live trusts.
  int64_t heartbeat_last_completed_seq = -1;
  int64_t heartbeat_last_started_seq = -1;
  // The seqs of the flight entries flight_tail.jsonl gave (merged over flight.json's by
  // diagnosis); -1 when it gave none.
  int64_t tail_first_seq = -1;
  int64_t tail_last_seq = -1;
};

struct RunFiles {
  std::string run_dir;
  std::optional<Summary> summary;
  std::optional<Diagnosis> live_diagnosis;  // diagnosis.json left by an earlier diagnosis
  int world_size = 0;
  std::vector<RankFiles> ranks;       // index == rank, world_size of them
  std::vector<std::string> problems;  // missing or unreadable inputs, one sentence each
};

// Reads one rank folder, keeping the newest `max_flight_entries` flight entries. Never throws;
// blocks on the folder's file reads.
RankFiles ReadRankFiles(const RankDir& dir, int rank, std::vector<std::string>* problems,
                        size_t max_flight_entries = kMaxFlightEntries);

// Reads a run directory. Blocks on file reads only (never on a FIFO). Never throws for bad
// contents; throws Error(kInvalidArgument) when `run_dir` is not a readable directory. The world
// is the largest of `world_size_hint`, the summary's ranks, the rank folders and the flight
// dumps' world_size, at most kMaxRanks; ranks without a folder are named in `problems`. Reads the
// folders on base::ReadThreads() threads, each rank's newest FlightEntriesKept(world, budget)
// entries; a problem line says so only when ranks' kept records no longer overlap.
// `summary_path` ("" = the run directory's summary.json) names the summary where the launcher
// had to write it elsewhere (a full disk: $TMPDIR/dlaunch-summary-<run-id>/summary.json).
RunFiles ReadRunDir(const std::string& run_dir, int world_size_hint = 0,
                    int64_t flight_entry_budget = kFlightEntryBudget,
                    const std::string& summary_path = "");

}  // namespace dlaunch::rundir
