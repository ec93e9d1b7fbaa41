#include "launcher/rendezvous/refusal_log.h"

namespace dlaunch::launcher {

RefusalLog::RefusalLog(std::ostream* out, std::chrono::milliseconds window, int lines_per_window)
    : out_(out), window_(window), lines_per_window_(lines_per_window) {}

void RefusalLog::Refused(const std::string& what, int64_t now_unix_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (now_unix_ms - window_start_ms_ >= window_.count()) {
    PrintSuppressedLocked();
    window_start_ms_ = now_unix_ms;
    printed_in_window_ = 0;
  }
  ++total_;
  if (printed_in_window_ < lines_per_window_) {
    ++printed_in_window_;
    *out_ << "dlaunch: " << what << std::endl;
    return;
  }
  ++suppressed_;
  last_suppressed_ = what;
}

void RefusalLog::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  PrintSuppressedLocked();
}

int64_t RefusalLog::total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

void RefusalLog::PrintSuppressedLocked() {
  if (suppressed_ == 0) return;
  *out_ << "dlaunch: refused " << suppressed_ << " more call" << (suppressed_ == 1 ? "" : "s")
        << " (" << total_ << " in all so far); the last: " << last_suppressed_ << std::endl;
  suppressed_ = 0;
  last_suppressed_.clear();
}

}  // namespace dlaunch::launcher
