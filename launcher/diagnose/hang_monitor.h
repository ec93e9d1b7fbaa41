// Live stall detection for the launcher's supervisor: notices when a job stops making progress,
// collects flight recorders and stacks, and returns the cross-rank diagnosis.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "launcher/diagnose/diagnosis.h"
#include "launcher/diagnose/job_view.h"

namespace dlaunch::launcher {

class HangMonitor {
 public:
  struct Options {
    // A collective in flight this long without progress (last completed seq and step unchanged)
    // is a hang when a peer has not entered it or no rank moves; with silence_is_hang, so is no
    // output from a rank that has neither libdlaunch nor the Python agent.
    std::chrono::milliseconds hang_timeout{std::chrono::seconds(300)};
    bool silence_is_hang = false;
    // Heartbeats are up to one interval old, so a peer that has just entered the collective
    // (leaving a declared section, say) can still read as absent. A collective stall counts once
    // every linked rank has sent a heartbeat since it first held (a stopped rank need not) and it
    // still holds, or at the latest once it has held this long (a Python rank whose agent cannot
    // get the GIL sends none). 0: at once.
    std::chrono::milliseconds stall_confirm{0};
    // A linked rank whose heartbeats stop for this long is stalled (stopped, swapping, dead host).
    std::chrono::milliseconds heartbeat_timeout{std::chrono::seconds(30)};
    // How long to wait for fresh flight.json files after asking for dumps.
    std::chrono::milliseconds dump_wait{std::chrono::seconds(2)};
    // Bound on one stack tool run (eu-stack or gdb); ranks are captured in parallel.
    std::chrono::milliseconds stack_timeout{std::chrono::seconds(10)};
    std::string stack_tool;  // "" = DefaultStackTool(): eu-stack where installed, else gdb
    // Write diagnosis.txt, diagnosis.json and trace.json into the run directory.
    bool write_files = true;
  };

  HangMonitor(JobView& job, Options options);

  // Call every ~250 ms with the wall clock. Cheap and non-blocking while the job progresses
  // (one Ranks() snapshot). On a stall it requests dumps, waits up to dump_wait for them,
  // captures stacks of silent ranks (up to stack_timeout), analyses, writes the files and returns
  // the diagnosis: that one call blocks for at most dump_wait + stack_timeout + file I/O.
  // After a diagnosis it returns nullopt until Reset().
  std::optional<Diagnosis> Poll(int64_t now_unix_ms);

  // Forget all history, e.g. after the launcher restarted the ranks. Does not block.
  void Reset();

  // Runs the stall diagnosis now, whatever the clocks say (e.g. on SIGUSR1). Blocks like Poll.
  Diagnosis DiagnoseNow(int64_t now_unix_ms, const std::string& trigger);

 private:
  struct Track {
    int64_t last_completed_seq = -2;
    int64_t step = -2;
    core::Phase phase = core::Phase::kUnknown;
    int64_t progress_unix_ms = 0;
    int64_t phase_since_unix_ms = 0;
    int64_t first_seen_unix_ms = 0;
  };

  // Returns the reason for a stall, "" when none.
  std::string FindStall(const std::vector<RankLiveState>& ranks, int64_t now_unix_ms);

  JobView& job_;
  Options options_;
  std::map<int, Track> tracks_;
  int64_t stall_since_unix_ms_ = 0;  // when the collective rule first held, 0 = it does not
  bool fired_ = false;
};

}  // namespace dlaunch::launcher
