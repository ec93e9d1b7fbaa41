#include "launcher/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/telemetry.h"
#include "launcher/log_capture.h"

namespace dlaunch::launcher {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};

sigset_t ForwardedSet() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kForwarded) sigaddset(&set, s);
  return set;
}

// Event sources are told apart by the tag in epoll_data.u64: kind in the high bits, rank index
// in the low ones.
enum Source : uint64_t { kSignal = 1, kStop, kTick, kGrace, kPid, kOut, kErr };
uint64_t Tag(Source s, size_t index = 0) { return (static_cast<uint64_t>(s) << 32) | index; }

struct Rank {
  const RankSpec* spec;
  SpawnedProcess proc;
  RankOutcome outcome;
  int out_log = -1, err_log = -1;
  LineSplitter out_lines, err_lines;
  bool console;
};

void ArmTimer(int fd, std::chrono::milliseconds first, std::chrono::milliseconds every) {
  itimerspec spec{};
  spec.it_value.tv_sec = first.count() / 1000;
  spec.it_value.tv_nsec = (first.count() % 1000) * 1000000;
  if (first.count() == 0) spec.it_value.tv_nsec = 1;
  spec.it_interval.tv_sec = every.count() / 1000;
  spec.it_interval.tv_nsec = (every.count() % 1000) * 1000000;
  ::timerfd_settime(fd, 0, &spec, nullptr);
}

int OpenLog(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error(ErrorKind::kInvalidArgument, "cannot write " + path + ": " + std::strerror(errno));
  }
  return fd;
}

}  // namespace

void BlockForwardedSignals() {
  sigset_t set = ForwardedSet();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

Supervisor::Supervisor(ProcessSpawner* spawner, SupervisorOptions options)
    : spawner_(spawner), options_(std::move(options)) {
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

void Supervisor::RequestStop(int exit_code, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stop_code_) return;
    stop_code_ = exit_code;
    stop_reason_ = reason;
  }
  uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof(one));
}

std::vector<Supervisor::LiveRank> Supervisor::Live() const {
  std::lock_guard<std::mutex> lock(live_mu_);
  return live_;
}

AttemptResult Supervisor::Run(const std::vector<RankSpec>& specs) {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_code_.reset();
    stop_reason_.clear();
    uint64_t drain;
    (void)!::read(stop_fd_, &drain, sizeof(drain));
  }
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  sigset_t sigs = ForwardedSet();
  const int sig_fd = ::signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
  const int tick_fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  const int grace_fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  auto watch = [&](int fd, uint64_t tag) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  };
  watch(sig_fd, Tag(kSignal));
  watch(stop_fd_, Tag(kStop));
  watch(tick_fd, Tag(kTick));
  watch(grace_fd, Tag(kGrace));
  ArmTimer(tick_fd, options_.tick, options_.tick);

  std::vector<Rank> ranks(specs.size());
  size_t running = 0;
  AttemptResult result;
  bool tearing_down = false;

  auto kill_all = [&](int sig) {
    for (auto& r : ranks)
      if (r.proc.pid > 0 && !r.outcome.exited) spawner_->SignalGroup(r.proc.pid, sig);
  };
  auto begin_teardown = [&] {
    if (tearing_down) return;
    tearing_down = true;
    for (auto& r : ranks)
      if (r.proc.pid > 0 && !r.outcome.exited) r.outcome.torn_down = true;
    kill_all(SIGTERM);
    ArmTimer(grace_fd, options_.grace_period, std::chrono::milliseconds(0));
  };

  // Reads what is there now; returns false at end of file.
  auto pump = [&](Rank& r, int& fd, bool is_err) {
    char buf[65536];
    std::vector<std::string> lines;
    bool open = true;
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;  // EAGAIN: drained for now
      if (n == 0) {
        open = false;
        break;
      }
      WriteAll(is_err ? r.err_log : r.out_log, std::string_view(buf, n));
      (is_err ? r.err_lines : r.out_lines).Feed(std::string_view(buf, n), &lines);
    }
    if (!open || r.outcome.exited) {
      if (auto rest = (is_err ? r.err_lines : r.out_lines).Flush()) lines.push_back(*rest);
    }
    if (!lines.empty()) {
      std::lock_guard<std::mutex> lock(live_mu_);
      live_[&r - ranks.data()].last_output_unix_ms = core::UnixMillis();
    }
    if (r.console && !lines.empty()) {
      WriteAll(is_err ? options_.console_err : options_.console_out,
               PrefixLines(r.spec->rank, lines));
    }
    if (!open) {
      ::epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
      ::close(fd);
      fd = -1;
    }
  };

  auto on_exit = [&](size_t i) {
    Rank& r = ranks[i];
    int status = spawner_->Reap(r.proc.pid);
    r.outcome.exited = true;
    r.outcome.end_unix_ms = core::UnixMillis();
    if (WIFSIGNALED(status)) {
      r.outcome.signal = WTERMSIG(status);
    } else {
      r.outcome.exit_code = WEXITSTATUS(status);
    }
    ::epoll_ctl(ep, EPOLL_CTL_DEL, r.proc.pidfd, nullptr);
    ::close(r.proc.pidfd);
    // Output written before the exit is in the pipes now; take it before judging the exit.
    if (r.proc.stdout_fd >= 0) pump(r, r.proc.stdout_fd, false);
    if (r.proc.stderr_fd >= 0) pump(r, r.proc.stderr_fd, true);
    --running;
    {
      std::lock_guard<std::mutex> lock(live_mu_);
      live_[i].exited = true;
    }
    // The rank's own children (a shell pipeline, python workers) go with it.
    spawner_->SignalGroup(r.proc.pid, SIGKILL);
    if (!r.outcome.ok() && !result.first_failure && !tearing_down) {
      r.outcome.torn_down = false;
      result.first_failure = i;
      begin_teardown();
    }
  };

  {
    std::lock_guard<std::mutex> lock(live_mu_);
    live_.assign(specs.size(), LiveRank{0, -1, 0, false});
  }
  try {
    for (size_t i = 0; i < specs.size(); ++i) {
      Rank& r = ranks[i];
      r.spec = &specs[i];
      r.console = !options_.quiet &&
                  (options_.console_ranks.empty() || options_.console_ranks.count(specs[i].rank));
      r.out_log = OpenLog(specs[i].rank_dir + "/stdout.log");
      r.err_log = OpenLog(specs[i].rank_dir + "/stderr.log");
      r.outcome.rank = specs[i].rank;
      r.outcome.local_rank = specs[i].local_rank;
      r.outcome.start_unix_ms = core::UnixMillis();
      r.proc = spawner_->Spawn(specs[i].process);
      r.outcome.pid = r.proc.pid;
      ++running;
      {
        std::lock_guard<std::mutex> lock(live_mu_);
        live_[i] = LiveRank{specs[i].rank, r.proc.pid, core::UnixMillis(), false};
      }
      watch(r.proc.pidfd, Tag(kPid, i));
      watch(r.proc.stdout_fd, Tag(kOut, i));
      watch(r.proc.stderr_fd, Tag(kErr, i));
    }
  } catch (...) {
    kill_all(SIGKILL);
    for (auto& r : ranks)
      if (r.proc.pid > 0) spawner_->Reap(r.proc.pid);
    throw;
  }

  int interrupts = 0;
  while (running > 0) {
    epoll_event events[32];
    int n = ::epoll_wait(ep, events, 32, -1);
    if (n < 0 && errno == EINTR) continue;
    for (int e = 0; e < n; ++e) {
      const auto source = static_cast<Source>(events[e].data.u64 >> 32);
      const size_t i = events[e].data.u64 & 0xffffffffu;
      switch (source) {
        case kPid:
          if (!ranks[i].outcome.exited) on_exit(i);
          break;
        case kOut:
          if (ranks[i].proc.stdout_fd >= 0) pump(ranks[i], ranks[i].proc.stdout_fd, false);
          break;
        case kErr:
          if (ranks[i].proc.stderr_fd >= 0) pump(ranks[i], ranks[i].proc.stderr_fd, true);
          break;
        case kSignal: {
          signalfd_siginfo info;
          while (::read(sig_fd, &info, sizeof(info)) == sizeof(info)) {
            const int sig = static_cast<int>(info.ssi_signo);
            if (sig == SIGUSR1 || sig == SIGUSR2) {
              kill_all(sig);
              continue;
            }
            if (++interrupts > 1) {
              kill_all(SIGKILL);  // a second Ctrl-C means now
              continue;
            }
            result.interrupted_by = sig;
            for (auto& r : ranks)
              if (!r.outcome.exited) r.outcome.torn_down = true;
            tearing_down = true;
            kill_all(sig);
            ArmTimer(grace_fd, options_.grace_period, std::chrono::milliseconds(0));
          }
          break;
        }
        case kStop: {
          uint64_t v;
          (void)!::read(stop_fd_, &v, sizeof(v));
          std::lock_guard<std::mutex> lock(stop_mu_);
          result.stop_code = stop_code_;
          result.stop_reason = stop_reason_;
          begin_teardown();
          break;
        }
        case kTick: {
          uint64_t v;
          (void)!::read(tick_fd, &v, sizeof(v));
          if (on_tick && !tearing_down) on_tick();
          break;
        }
        case kGrace: {
          uint64_t v;
          (void)!::read(grace_fd, &v, sizeof(v));
          kill_all(SIGKILL);
          break;
        }
      }
    }
  }
  for (auto& r : ranks) {
    for (int* fd : {&r.proc.stdout_fd, &r.proc.stderr_fd}) {
      if (*fd >= 0) ::close(*fd);  // a grandchild may still hold the pipe: do not wait for it
    }
    ::close(r.out_log);
    ::close(r.err_log);
    result.ranks.push_back(r.outcome);
  }
  ::close(ep);
  ::close(sig_fd);
  ::close(tick_fd);
  ::close(grace_fd);
  return result;
}

}  // namespace dlaunch::launcher
