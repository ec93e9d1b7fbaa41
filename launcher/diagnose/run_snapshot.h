// Everything a run directory says about a job, read leniently: a half-written or missing file
// becomes a line in `problems`, never an exception, because the directory is often the remains of
// a crash (the launcher itself may have been SIGKILLed).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "launcher/diagnose/job_view.h"

namespace dlaunch::launcher {

// One row of rank<R>/flight.json.
struct FlightEntry {
  int64_t seq = -1;
  // Index among collectives only (-1 for send/recv, or when the recorder does not write it):
  // ranks agree on it even when their point-to-point traffic differs.
  int64_t collective_seq = -1;
  std::string op;
  std::string dtype;
  int64_t count = -1;
  int64_t bytes = -1;
  int peer = -1;
  int root = -1;
  std::string state;  // scheduled | started | completed | failed
  int64_t scheduled_unix_ns = 0;
  int64_t started_unix_ns = 0;
  int64_t completed_unix_ns = 0;
  int64_t duration_us = 0;
  std::string error;
};

struct FlightDump {
  bool present = false;  // the file exists
  bool valid = false;    // and parsed
  int world_size = 0;
  std::string backend;
  std::string reason;
  int64_t dumped_unix_ms = 0;
  std::vector<FlightEntry> entries;  // sorted by seq

  const FlightEntry* Find(int64_t seq) const;
  // Highest seq completed with every lower seq in the buffer completed too; -1 when none.
  int64_t LastCompletedSeq() const;
  int64_t LastStartedSeq() const;  // highest seq that got past "scheduled"; -1 when none
};

// A "telemetry" line of events.jsonl: what the rank was doing and how much memory it held.
struct TelemetrySample {
  int64_t unix_ms = 0;
  int64_t step = -1;
  std::string phase;
  int64_t rss_bytes = -1;
  int64_t peak_rss_bytes = -1;
  int64_t device_allocated_bytes = -1;
  int64_t device_reserved_bytes = -1;
  int64_t device_peak_bytes = -1;
  int64_t device_free_bytes = -1;
  int64_t device_total_bytes = -1;
};

// Any other line of events.jsonl ("timeout", "error", "oom", "dumped", ...), body kept whole.
struct RankEvent {
  int64_t unix_ms = 0;
  std::string kind;
  nlohmann::json body;
};

// What summary.json says about one rank.
struct RankSummary {
  std::string host;
  int pid = 0;
  std::string status;  // ok | failed | killed | running
  int exit_code = 0;
  int signal = 0;  // from a number or a name ("SIGABRT"), else from a negative exit code
  int64_t start_unix_ms = 0;
  int64_t end_unix_ms = 0;
  int restarts = 0;
  std::string error;
};

struct RankRecord {
  int rank = 0;
  bool dir_present = false;
  FlightDump flight;
  std::vector<TelemetrySample> telemetry;
  std::vector<RankEvent> events;
  std::optional<nlohmann::json> error;  // error.json
  std::string stacks;                   // stacks.txt
  std::vector<std::string> nccl_warnings;
  std::vector<std::string> stderr_tail;  // last lines of stderr.log
  std::optional<RankSummary> summary;
  int64_t last_output_unix_ms = 0;  // mtime of stdout.log / stderr.log, 0 when absent

  // Filled only for a live diagnosis.
  std::optional<RankLiveState> live;
  int64_t live_phase_since_unix_ms = 0;
  bool answered_dump = false;
  std::string process_state;  // from /proc/<pid>/stat, e.g. "T (stopped)"
};

struct RunSnapshot {
  std::string run_dir;
  std::string run_id;
  int world_size = 0;
  std::optional<int> exit_code;                  // summary.json's, when present
  std::optional<nlohmann::json> live_diagnosis;  // diagnosis.json written while the job ran
  std::vector<RankRecord> ranks;                 // index == rank
  std::vector<std::string> problems;             // missing or unreadable inputs, one sentence each
};

// Reads a run directory. Blocks on file reads only. Never throws for bad contents; throws
// Error(kInvalidArgument) when `run_dir` is not a readable directory. `world_size_hint` (0 = derive
// from summary.json, flight.json and the rank folders) names ranks whose folders are missing.
RunSnapshot LoadRunDir(const std::string& run_dir, int world_size_hint = 0);

}  // namespace dlaunch::launcher
