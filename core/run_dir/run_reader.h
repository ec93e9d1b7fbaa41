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
  int64_t last_output_unix_ms = 0;       // mtime of stdout.log / stderr.log, 0 when absent
};

struct RunFiles {
  std::string run_dir;
  std::optional<Summary> summary;
  std::optional<Diagnosis> live_diagnosis;  // diagnosis.json left by an earlier diagnosis
  int world_size = 0;
  std::vector<RankFiles> ranks;       // index == rank, world_size of them
  std::vector<std::string> problems;  // missing or unreadable inputs, one sentence each
};

// Reads one rank folder. Never throws.
RankFiles ReadRankFiles(const RankDir& dir, int rank, std::vector<std::string>* problems);

// Reads a run directory. Blocks on file reads only (never on a FIFO). Never throws for bad
// contents; throws Error(kInvalidArgument) when `run_dir` is not a readable directory. The world
// is the largest of `world_size_hint`, the summary's ranks, the rank folders and the flight
// dumps' world_size, at most kMaxRanks; ranks without a folder are named in `problems`.
RunFiles ReadRunDir(const std::string& run_dir, int world_size_hint = 0);

}  // namespace dlaunch::rundir
