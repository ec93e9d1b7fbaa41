// The launcher's side of the Python rank agent's channel: files in the rank directory
// (docs/run-directory.md, "Python ranks"). The agent rewrites heartbeat.json every heartbeat
// interval; the launcher replaces dump_request to ask for flight.json and py_stacks.txt now.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/runtime.h"

namespace dlaunch::launcher::python {

inline constexpr const char* kHeartbeatFile = "heartbeat.json";
inline constexpr const char* kDumpRequestFile = "dump_request";
inline constexpr const char* kPythonStacksFile = "py_stacks.txt";

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
};

// rank_dir/heartbeat.json; nullopt when absent or unreadable (a half-written file cannot occur:
// the agent renames it into place). Never throws; blocks for one small read.
std::optional<AgentHeartbeat> ReadAgentHeartbeat(const std::string& rank_dir);

// "forward" -> Phase::kForward ...; kUnknown for a name it does not know.
core::Phase PhaseFromName(const std::string& name);

// Replaces rank_dir/dump_request; the agent answers within about 100 ms by rewriting flight.json
// and py_stacks.txt. Never throws (a rank directory that is gone gets no request).
void RequestAgentDump(const std::string& rank_dir, const std::string& reason);

// Removes what an agent of an earlier attempt left (its heartbeat), so that a heartbeat found
// is this attempt's.
void ClearAgentFiles(const std::string& rank_dir);

}  // namespace dlaunch::launcher::python
