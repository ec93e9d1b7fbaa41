// Reading stacks: native ones (gdb's `thread apply all bt`, as stacks.txt holds them) and a Python
// rank's (py_stacks.txt, from the rank agent): what the main thread is doing. Pure text
// processing; does not block, never throws.
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

// The main thread of gdb's output ("Thread 1") or of eu-stack's (the TID equal to the PID).
StackSummary ParseGdbStacks(const std::string& stacks);

// The main thread (`Thread ID "NAME" (main) (most recent call last):`) of py_stacks.txt; `top` is
// the innermost source line, then the innermost frames: "time.sleep(3600) < train.py:25 <module>".
// Deep inside a library (a stalled DataLoader), the user's own frame and the library frame that
// explains the wait lead: "train.py:12 for b in loader: > dataloader.py:1316 _next_data;
// innermost: ...". The agent's wrapper frames (dlaunch/_torch_hooks.py) are left out.
StackSummary ParsePythonStacks(const std::string& stacks);

}  // namespace dlaunch::launcher
