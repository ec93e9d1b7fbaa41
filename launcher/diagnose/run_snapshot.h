// What diagnosis reads about a run: the run directory's files, read through core/run_dir (so a
// Python rank that writes the same flight.json, events.jsonl and error.json is read the same way),
// and, for a live diagnosis, what the launcher sees of each rank.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/run_dir/run_reader.h"
#include "launcher/diagnose/diagnosis.h"
#include "launcher/diagnose/job_view.h"
#include "launcher/python/torch_flight.h"

namespace dlaunch::launcher {

using rundir::Event;
using rundir::FlightDump;
using rundir::FlightEntry;
using rundir::TelemetrySample;

struct RankRecord : rundir::RankFiles {
  std::optional<rundir::SummaryRank> summary;  // this rank's entry of summary.json

  // Filled only for a live diagnosis.
  std::optional<RankLiveState> live;
  int64_t live_phase_since_unix_ms = 0;
  bool answered_dump = false;
  std::string process_state;  // from /proc/<pid>/stat, e.g. "T (stopped)"
  // PyTorch's own flight-recorder dumps in the rank folder (python_evidence.h).
  std::vector<python::TorchFlightDump> torch_flight;
};

struct RunSnapshot {
  std::string run_dir;
  std::string run_id;
  int world_size = 0;
  std::optional<int> exit_code;            // summary.json's, when present
  std::string error;                       // summary.json's root cause or stop reason
  std::vector<rundir::SummaryNode> nodes;  // multi-node: summary.json's, on node 0
  int local_ranks = 0;  // summary.json's ranks of the node that wrote it (multi-node: per node)
  std::optional<rundir::Diagnosis> live_diagnosis;  // diagnosis.json written while the job ran
  // The latest time summary.json and diagnosis.json record (the summary's update and ends, the
  // diagnosis' creation); 0 when neither says. With the ranks' own latest records it is when an
  // offline diagnosis takes the run to have ended (RecordedEndUnixMs, rank_facts.h).
  int64_t ended_unix_ms = 0;
  // The job's straggler verdicts, active and ended: summary.json's, else those of an earlier
  // diagnosis.json; a live diagnosis puts node 0's own (JobView::Stragglers) in their place.
  std::vector<rundir::StragglerVerdict> stragglers;
  std::vector<RankRecord> ranks;      // index == rank
  std::vector<std::string> problems;  // missing or unreadable inputs, one sentence each
  // Ranks whose torch flight-recorder dumps LoadRunDir left unread (see kTorchDumpsOfEveryRank):
  // how many, and per rank (index == rank, 1 = skipped).
  int torch_dumps_skipped = 0;
  std::vector<char> torch_skipped_ranks;
  // The dumps that could not be read (past the limits of `torch_budget`, undecodable), by name.
  rundir::SkippedList skipped_evidence;
  // What is left of the limits of reading torch dumps, for LoadRunDir and ReadCulpritTorchFlight
  // together.
  std::shared_ptr<python::TorchReadBudget> torch_budget;
};

// Up to this world size every rank's torch flight-recorder dumps are read; past it only those of
// ranks without a flight recorder of dlaunch's (and, after the analysis, the culprits').
inline constexpr int kTorchDumpsOfEveryRank = 64;
inline constexpr size_t kCulpritTorchDumps = 16;  // at most, read after the analysis

// Reads a run directory (rundir::ReadRunDir). Blocks on file reads only. Never throws for bad
// contents; throws Error(kInvalidArgument) when `run_dir` is not a readable directory.
// `world_size_hint` (0 = derive from summary.json, flight.json and the rank folders) names ranks
// whose folders are missing.
// Reads the rank folders on base::ReadThreads() threads; problems are in rank order all the same.
// torch's dumps are read within `torch`.
// `summary_path`: as rundir::ReadRunDir's.
RunSnapshot LoadRunDir(const std::string& run_dir, int world_size_hint = 0,
                       const python::TorchReadLimits& torch = {},
                       const std::string& summary_path = "");
// LoadRunDir as the launcher reads its own run directory while the job waits for it (after a
// failed attempt, a live hang, a dump): torch's dumps within python::kLauncherTorchRead.
RunSnapshot LoadRunDirForLauncher(const std::string& run_dir, int world_size_hint,
                                  const std::string& summary_path = "");

// Reads the torch dumps LoadRunDir skipped of `diagnosis`'s culprits (at most kCulpritTorchDumps),
// so that AttachTorchFlight shows them. Blocks for ~0.2 s per dump. Never throws.
void ReadCulpritTorchFlight(const Diagnosis& diagnosis, RunSnapshot* run);
// One detail line saying how many ranks' torch dumps were not read; nothing when none.
void NoteSkippedTorchFlight(const RunSnapshot& run, Diagnosis* diagnosis);

}  // namespace dlaunch::launcher
