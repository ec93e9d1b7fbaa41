// The launcher's side of the Python rank agent's channel: rank<R>/heartbeat.json, which the agent
// rewrites every heartbeat interval (and sends through its pipe when the file cannot be written),
// and rank<R>/dump_request, which the launcher replaces to ask for flight.json and py_stacks.txt
// now (core/run_dir/heartbeat_file.h; docs/run-directory.md, "Python ranks").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/runtime.h"

namespace dlaunch::launcher::python {

// A heartbeat as the hang monitor uses it.
struct AgentHeartbeat {
  int pid = 0;
  int64_t unix_ms = 0;           // when the agent wrote it
  int64_t progress_unix_ms = 0;  // last change of the flight recorder or the step
  int64_t phase_since_unix_ms = 0;
  core::RankStatus status;
  // dlaunch.section(name, timeout_s): "" outside one; timeout -1 = the job's --hang-timeout.
  std::string section;
  int64_t section_since_unix_ms = 0;
  double section_timeout_s = -1;
  // Set when it came through the pipe: why heartbeat.json could not be written.
  std::string write_error;
};

// rank_dir's heartbeat.json; nullopt when absent or unreadable. Never throws; blocks for one
// small read.
std::optional<AgentHeartbeat> ReadAgentHeartbeat(const std::string& rank_dir);

// The last line the agent sent through its pipe (Supervisor::LiveRank::agent_line); nullopt when
// empty or not a heartbeat. Never throws; does not block.
std::optional<AgentHeartbeat> ParseAgentHeartbeat(const std::string& line);

// "forward" -> Phase::kForward ...; kUnknown for a name it does not know.
core::Phase PhaseFromName(const std::string& name);

// Replaces rank_dir's dump_request; the agent answers within about 200 ms by rewriting
// flight.json and py_stacks.txt. Never throws (a rank directory that is gone gets no request).
void RequestAgentDump(const std::string& rank_dir, const std::string& reason);

// Removes what an agent of an earlier attempt left (its heartbeat, Python stacks, flight tail and
// the reason it did not start), so that those found are this attempt's.
void ClearAgentFiles(const std::string& rank_dir);

}  // namespace dlaunch::launcher::python
