// Native stacks of a process that stopped answering: `gdb -p PID -batch -ex "thread apply all bt"`.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace dlaunch::launcher {

struct StackCapture {
  bool ok = false;            // gdb ran and printed at least one frame
  std::string text;           // what goes into stacks.txt (always explains a failure)
  std::string process_state;  // from /proc/<pid>/stat, e.g. "T (stopped)"; "" when gone
};

// Blocks until gdb finishes, at most `timeout` (gdb is then killed). Never throws. The target's
// run state is left as it was (a stopped process stays stopped). `gdb_path` is for tests.
StackCapture CaptureStacks(int pid, std::chrono::milliseconds timeout,
                           const std::string& gdb_path = "gdb");

// One process whose stacks go into a file (a rank's stacks.txt).
struct StackTarget {
  int rank = -1;
  int pid = 0;
  std::string path;
};
struct StackResult {
  int rank = -1;
  std::string process_state;  // as CaptureStacks gives it
  std::string problem;        // "" when the file was written
};

// Captures every target in parallel, so the call is bounded by one `timeout`, and writes each
// one's stacks to its path (rundir::WriteStacks). Blocks; never throws.
std::vector<StackResult> CaptureStacksInto(const std::vector<StackTarget>& targets,
                                           std::chrono::milliseconds timeout,
                                           const std::string& gdb_path = "gdb");

// "R (running)", "S (sleeping)", "T (stopped)", "Z (zombie)", ...; "" when the pid is gone.
std::string ProcessState(int pid);

}  // namespace dlaunch::launcher
