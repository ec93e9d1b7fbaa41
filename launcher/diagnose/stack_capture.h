// Native stacks of a process that stopped answering: `gdb -p PID -batch -ex "thread apply all bt"`.
#pragma once

#include <chrono>
#include <string>

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

// "R (running)", "S (sleeping)", "T (stopped)", "Z (zombie)", ...; "" when the pid is gone.
std::string ProcessState(int pid);

}  // namespace dlaunch::launcher
