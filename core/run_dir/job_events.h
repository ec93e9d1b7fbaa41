// --events-file FILE: the job's events as JSON lines, one object a line, appended as they happen:
// what torchrun's event handlers offer a metrics or logging sink. Written by node 0's launcher;
// read by whatever the user points at it. No secrets: no token, no environment.
// docs/run-directory.md, "Job events".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dlaunch::rundir {

inline constexpr char kJobEventSchema[] = "job_event";

enum class JobEventKind {
  kUnknown,
  kRankStart,        // a rank's process started (rank, host, pid)
  kRankExit,         // it ended (exit_code or signal)
  kRestart,          // a new attempt starts (message: why)
  kHang,             // a hang was diagnosed (message: the headline)
  kStragglerStart,   // a straggler verdict began (rank, host, message: its text)
  kStragglerEnd,     // it ended
  kNodeLost,         // a node failed or went silent (node_rank, host, message)
  kRestartDecision,  // the restart policy's decision after a failure (message: it, with its reason)
};
// unknown | rank_start | rank_exit | restart | hang | straggler_start | straggler_end | node_lost |
// restart_decision
const char* JobEventKindName(JobEventKind kind);
JobEventKind ParseJobEventKind(std::string_view name);  // kUnknown for anything else

struct JobEvent {
  JobEventKind kind = JobEventKind::kUnknown;
  int64_t unix_ms = 0;
  std::string run_id;
  int attempt = 0;
  int rank = -1;       // -1: not about one rank
  int node_rank = -1;  // kNodeLost
  std::string host;
  int pid = 0;
  std::optional<int> exit_code;  // kRankExit, when it exited by itself
  std::string signal;            // kRankExit by a signal: "SIGKILL"
  std::string message;           // one line
};

// One line of JSON, without the newline, with "schema": "dlaunch.job_event/1".
std::string JobEventToJson(const JobEvent& event);
// Lenient; false for a line that is not a JSON object of this schema. Never throws.
bool JobEventFromJson(std::string_view line, JobEvent* out);

}  // namespace dlaunch::rundir
