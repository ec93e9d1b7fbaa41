// rank<R>/heartbeat.json and rank<R>/dump_request: the channel between the launcher and a Python
// rank's agent (native ranks use their gRPC heartbeat stream instead). The agent rewrites
// heartbeat.json every heartbeat interval, and sends the same document as one line through the
// pipe the launcher gave it (DLAUNCH_AGENT_FD) whenever the file cannot be written (a full disk,
// an immutable folder); the launcher replaces dump_request to ask for flight.json and
// py_stacks.txt now. docs/run-directory.md, "Python ranks".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/run_dir/memory_figures.h"
#include "core/run_dir/schema.h"

namespace dlaunch::rundir {

inline constexpr char kHeartbeatSchema[] = "heartbeat";
inline constexpr char kDumpRequestSchema[] = "dump_request";
inline constexpr size_t kMaxHeartbeatBytes = 64 << 10;

// The memory figures (all seven; the agent writes the device ones on CUDA only) are flat in the
// file, as in the struct.
struct Heartbeat : MemoryFigures {
  int rank = -1;
  int pid = 0;
  int64_t unix_ms = 0;  // when the agent wrote it
  int64_t step = 0;
  std::string phase;  // init | data | forward | backward | communication | ...
  int64_t phase_since_unix_ms = 0;
  int64_t progress_unix_ms = 0;  // last change of the flight recorder or the step
  int64_t last_started_seq = -1;
  int64_t last_completed_seq = -1;
  std::string current_op;  // of the collective in flight; "" when none
  // dlaunch.section(name, timeout_s): "" outside one; timeout -1 = the job's --hang-timeout.
  std::string section;
  int64_t section_since_unix_ms = 0;
  double section_timeout_s = -1;
  // Straggler measures, as core::RankStatus has them ("steps_timed", "step_busy_ms_total",
  // "arrivals": {"first_seq", "started_unix_us": [...]}); absent in older files.
  int64_t steps_timed = 0;
  double step_busy_ms_total = 0;
  int64_t arrivals_first_seq = -1;
  std::vector<int64_t> arrival_unix_us;
  // Only in a heartbeat that came through the agent's pipe: why heartbeat.json could not be
  // written ("heartbeat.json: [Errno 28] No space left on device").
  std::string write_error;
};

// Atomically. Blocks for the write; throws Error(kInternal). (The agent writes the same format.)
void WriteHeartbeat(const std::string& path, const Heartbeat& heartbeat);

// Never throws; blocks for one small read. A half-written file cannot occur: writers rename it
// into place.
FileState ReadHeartbeat(const std::string& path, const std::string& label, Heartbeat* out,
                        std::vector<std::string>* problems);

// The longest line the agent sends through its pipe: PIPE_BUF, so that each write is atomic.
inline constexpr size_t kMaxPipedHeartbeat = 4096;

// The same, of one line the agent sent through its pipe (DLAUNCH_AGENT_FD) because it could not
// write the file. Never throws; does not block.
FileState ParseHeartbeat(const std::string& text, const std::string& label, Heartbeat* out,
                         std::vector<std::string>* problems);

// Replaces `path` with {"schema", "reason", "unix_ms"}; the agent acts on any new version of the
// file (a new inode), whatever it holds. Blocks for the write; throws Error(kInternal).
void WriteDumpRequest(const std::string& path, const std::string& reason, int64_t unix_ms);

}  // namespace dlaunch::rundir
