// Native stacks of a process that stopped answering: `eu-stack -p PID` (elfutils) where it is
// installed, else `gdb -p PID -batch -ex "thread apply all bt"`. eu-stack reads a libtorch rank's
// stacks in ~0.1-0.5 s, stopped or not; gdb takes ~8 s to load libtorch's symbols.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace dlaunch::launcher {

struct StackCapture {
  bool ok = false;            // the tool ran and printed at least one frame
  std::string text;           // what goes into stacks.txt (always explains a failure)
  std::string process_state;  // from /proc/<pid>/stat, e.g. "T (stopped)"; "" when gone
};

// The stack tool used by default: "eu-stack" when it is on PATH, else "gdb". Blocks for a few
// stat(2) calls the first time; the answer is kept.
const std::string& DefaultStackTool();

// Blocks until the tool finishes, at most `timeout` (it is then killed). Never throws. The
// target's run state is left as it was (a stopped process stays stopped). `tool` is a path or
// name of gdb or eu-stack (told apart by the name); "" for DefaultStackTool().
StackCapture CaptureStacks(int pid, std::chrono::milliseconds timeout,
                           const std::string& tool = "");

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
                                           const std::string& tool = "");

// "R (running)", "S (sleeping)", "T (stopped)", "Z (zombie)", ...; "" when the pid is gone.
std::string ProcessState(int pid);

}  // namespace dlaunch::launcher
