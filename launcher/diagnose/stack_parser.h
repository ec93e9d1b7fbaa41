// Reading native stacks (gdb's `thread apply all bt`, as stacks.txt holds them): what the main
// thread is doing. Pure text processing; does not block, never throws.
#pragma once

#include <string>

namespace dlaunch::launcher {

// What a main thread is doing, judged from its innermost frames.
enum class StackActivity {
  kNone,        // no main-thread stack captured
  kCollective,  // inside a communication library (gloo, NCCL, c10d, MPI) or a device sync
  kWait,        // blocked on a read, a lock, a poll
  kSleep,
  kRun,  // anything else: compute, Python bytecode, ...
};
const char* StackActivityName(StackActivity activity);  // "", collective, wait, sleep, run

struct StackSummary {
  StackActivity activity = StackActivity::kNone;
  std::string top;  // innermost frames, "poll < gloo::...::wait < main"
};

// The main thread ("Thread 1") of gdb's output.
StackSummary ParseGdbStacks(const std::string& stacks);

}  // namespace dlaunch::launcher
