// The launcher as the hang monitor sees it: a snapshot of each rank's liveness, and a way to ask
// the ranks for their flight recorders. Implemented by the launcher's supervisor; faked in tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/run_dir/straggler_verdicts.h"
#include "core/runtime.h"

namespace dlaunch::launcher {

struct RankLiveState {
  int rank = 0;
  int pid = 0;          // 0 for a rank on another node: no process state or stacks for it here
  bool remote = false;  // on another node: its node's agent takes its stacks (RemoteStacks)
  bool linked = false;  // has a heartbeat stream (the program uses libdlaunch) or a Python agent
  // The rank said, as it started, that it runs the Python agent: its heartbeats are its
  // heartbeat.json, its dumps its agent's files.
  bool runs_agent = false;
  // Why the agent could not write heartbeat.json (its newest heartbeat came through its pipe
  // instead): "heartbeat.json: [Errno 28] No space left on device"; "" when it could.
  std::string heartbeat_write_error;
  core::RankStatus status;
  int64_t last_heartbeat_unix_ms = 0;
  // When status.last_completed_seq or status.step last changed; 0 = unknown (the monitor then
  // tracks changes itself).
  int64_t last_progress_unix_ms = 0;
  int64_t last_output_unix_ms = 0;  // last stdout/stderr line; 0 = none yet
  // Inside a section the program declared (dlaunch.section, "" = none): no hang is declared while
  // it lasts, up to its timeout (-1: the job's --hang-timeout) from section_since_unix_ms.
  std::string section;
  int64_t section_since_unix_ms = 0;
  int64_t section_timeout_ms = -1;
  bool exited = false;
  bool failed = false;  // exited with a non-zero code or by a signal
};

class JobView {
 public:
  virtual ~JobView() = default;
  // A consistent copy of every rank's state, index == rank. Must not block for long (a mutex).
  virtual std::vector<RankLiveState> Ranks() = 0;
  // Sends DUMP to every linked rank; ranks then rewrite rank<R>/flight.json. Does not block.
  virtual void RequestDump(const std::string& reason) = 0;
  // Asks every other node's agent for the native stacks of its `ranks` (remote ranks that did not
  // answer the dump) and for its ranks' files as they are now. Blocks until every node answered,
  // at most `timeout`; returns the process state of each rank a node saw ("T (stopped)", "" when
  // gone). A single-node job (the default) returns at once.
  virtual std::map<int, std::string> RemoteStacks(const std::vector<int>& /*ranks*/,
                                                  std::chrono::milliseconds /*timeout*/) {
    return {};
  }
  // The job's straggler verdicts as node 0's detector has them now, active and ended, for the
  // diagnosis; nullopt where this view has no detector (then summary.json's stand). Thread-safe;
  // does not block beyond a mutex.
  virtual std::optional<std::vector<rundir::StragglerVerdict>> Stragglers() { return std::nullopt; }
  virtual std::string run_dir() const = 0;
};

}  // namespace dlaunch::launcher
