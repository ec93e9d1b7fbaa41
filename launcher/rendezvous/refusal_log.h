// The console lines for calls the coordinator refuses. A caller that keeps trying (a rank with a
// stale token, a port scanner, a forger) must not flood the console: the first few refusals of a
// window are printed whole, the rest are counted and summed up in one line when the window is
// over (at the next refusal) or at Flush.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>

namespace dlaunch::launcher {

class RefusalLog {
 public:
  // Lines go to `out` (which outlives the log), "dlaunch: " first.
  RefusalLog(std::ostream* out, std::chrono::milliseconds window, int lines_per_window);

  // One refused call, `what` its line ("refused NodeStream from ipv4:...: no job token"), at
  // `now_unix_ms`. Prints it, or counts it. Does not block (a write to `out`).
  void Refused(const std::string& what, int64_t now_unix_ms);
  // Prints the count of refusals not printed yet, if any. Does not block.
  void Flush();

  int64_t total() const;  // every refusal so far

 private:
  void PrintSuppressedLocked();

  std::ostream* out_;
  const std::chrono::milliseconds window_;
  const int lines_per_window_;
  mutable std::mutex mu_;
  int64_t total_ = 0;
  int64_t window_start_ms_ = 0;
  int printed_in_window_ = 0;
  int64_t suppressed_ = 0;  // in this window, not printed
  std::string last_suppressed_;
};

}  // namespace dlaunch::launcher
