// A forked child that sleeps in pause() until killed: a stand-in for a hung rank, or for a process
// a test expects something to signal. Killed and reaped when it goes, unless reaped already.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dlaunch::testing {

class PausedChild {
 public:
  PausedChild() {
    pid_ = ::fork();
    if (pid_ == 0) {
      for (;;) ::pause();
    }
    pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  }
  ~PausedChild() {
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(pidfd_);
  }
  PausedChild(const PausedChild&) = delete;
  PausedChild& operator=(const PausedChild&) = delete;

  pid_t pid() const { return pid_; }
  // The signal that ended it within `timeout_ms` (-1: it exited); 0 while it still runs.
  int WaitKilled(int timeout_ms) {
    pollfd p{pidfd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) != 1) return 0;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFSIGNALED(status) ? WTERMSIG(status) : -1;
  }
  bool Alive() const { return !reaped_ && ::kill(pid_, 0) == 0; }

 private:
  pid_t pid_ = -1;
  int pidfd_ = -1;
  bool reaped_ = false;
};

}  // namespace dlaunch::testing
