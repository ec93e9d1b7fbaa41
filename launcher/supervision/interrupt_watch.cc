#include "launcher/supervision/interrupt_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "launcher/supervision/supervisor.h"

namespace dlaunch::launcher {

InterruptWatch::InterruptWatch(std::function<void(int)> on_signal)
    : on_signal_(std::move(on_signal)) {
  sigset_t sigs = JobEndingSignals();
  sig_fd_.reset(::signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK));
  stop_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!sig_fd_ || !stop_fd_) {
    throw Error(ErrorKind::kInternal, std::string("signal watch: ") + std::strerror(errno));
  }
  Start();
}

InterruptWatch::~InterruptWatch() { Stop(); }

void InterruptWatch::Start() {
  if (thread_.joinable() || signal_.load() != 0) return;
  uint64_t left;
  (void)!::read(stop_fd_.get(), &left, sizeof(left));  // an earlier Stop's
  thread_ = std::thread([this] { Loop(); });
}

void InterruptWatch::Stop() {
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  (void)!::write(stop_fd_.get(), &one, sizeof(one));
  thread_.join();
}

void InterruptWatch::Loop() {
  pollfd fds[2] = {{sig_fd_.get(), POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    signalfd_siginfo info;
    if (::read(sig_fd_.get(), &info, sizeof(info)) != sizeof(info)) continue;
    signal_ = static_cast<int>(info.ssi_signo);
    on_signal_(signal_.load());
    return;  // later signals stay pending: the launcher is on its way out, and sees them there
  }
}

}  // namespace dlaunch::launcher
