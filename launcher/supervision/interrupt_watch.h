// The job-ending signals (those of --signals-to-handle among SIGINT, SIGTERM, SIGHUP, SIGQUIT)
// while no attempt runs, when the launcher waits in the node rendezvous: a thread of its own
// reads them from a signalfd and tells whoever waits, so that every wait ends on the signal
// instead of at its timeout. While the watch is stopped the signals stay pending, for the
// supervisor's own signalfd.
#pragma once

#include <atomic>
#include <functional>
#include <thread>

#include "core/base/unique_fd.h"

namespace dlaunch::launcher {

class InterruptWatch {
 public:
  // `on_signal` runs on the watch's thread, once, for the first signal; it must not block (it
  // ends the waits: a condition variable's notice, a gRPC call's TryCancel).
  explicit InterruptWatch(std::function<void(int signal)> on_signal);
  // Stops the watch.
  ~InterruptWatch();
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;

  // Starts watching (again); does not block. A no-op once a signal came.
  void Start();
  // Stops watching; blocks until the thread is gone (at once: it waits on an eventfd too).
  void Stop();
  // The signal that came, 0 for none. Thread-safe.
  int signal() const { return signal_.load(); }

 private:
  void Loop();

  std::function<void(int)> on_signal_;
  base::UniqueFd sig_fd_, stop_fd_;
  std::atomic<int> signal_{0};
  std::thread thread_;
};

}  // namespace dlaunch::launcher
