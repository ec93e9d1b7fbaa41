#include "launcher/supervision/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/base/clock.h"
#include "core/base/files.h"
#include "core/base/format.h"
#include "core/base/proc.h"
#include "core/error.h"
#include "core/run_dir/paths.h"
#include "launcher/supervision/log_capture.h"

namespace dlaunch::launcher {
namespace {

constexpr int kForwardable[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
// How long a rank's death by SIGTERM/SIGINT/SIGHUP waits for the same signal to the launcher.
constexpr int kOwnSignalWaitMs = 200;

sigset_t ForwardableSet() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kForwardable) sigaddset(&set, s);
  return set;
}

// The ones HandleSignals chose; process-wide, like the signal dispositions they stand for.
sigset_t g_handled = ForwardableSet();

// Event sources are told apart by the tag in epoll_data.u64: kind in the high bits, rank index
// in the low ones.
enum Source : uint64_t { kSignal = 1, kStop, kTick, kGrace, kPid, kOut, kErr, kAgent };
uint64_t Tag(Source s, size_t index = 0) { return (static_cast<uint64_t>(s) << 32) | index; }

void ArmTimer(int fd, std::chrono::milliseconds first, std::chrono::milliseconds every) {
  itimerspec spec{};
  spec.it_value.tv_sec = first.count() / 1000;
  spec.it_value.tv_nsec = (first.count() % 1000) * 1000000;
  if (first.count() == 0) spec.it_value.tv_nsec = 1;
  spec.it_interval.tv_sec = every.count() / 1000;
  spec.it_interval.tv_nsec = (every.count() % 1000) * 1000000;
  ::timerfd_settime(fd, 0, &spec, nullptr);
}

// Reads the 8-byte counter of an eventfd or timerfd so it stops being readable.
void DrainCounter(int fd) {
  uint64_t v;
  (void)!::read(fd, &v, sizeof(v));
}

base::UniqueFd OpenLog(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd) {
    throw Error(ErrorKind::kInvalidArgument, "cannot write " + path + ": " + std::strerror(errno));
  }
  return fd;
}

base::UniqueFd Checked(int fd, const char* what) {
  if (fd < 0) throw Error(ErrorKind::kInternal, std::string(what) + ": " + std::strerror(errno));
  return base::UniqueFd(fd);
}

// One output stream of a rank: the pipe it comes from, the log it goes to, its partial line.
struct Stream {
  base::UniqueFd* pipe = nullptr;  // into the rank's SpawnedProcess
  base::UniqueFd log;
  std::string log_name;  // "rank1/stdout.log"
  uint64_t logged = 0;   // bytes in the log
  int log_errno = 0;     // why the log was cut short; 0 while it is whole
  LineSplitter lines;
  bool is_err = false;
  bool console = false;                               // its lines go to the console
  const std::vector<std::string>* filters = nullptr;  // --duplicate-*-filters, when given
  base::UniqueFd filtered;                            // their file
};

// "rank1/stdout.log" of "<run dir>/rank1" and "stdout.log".
// "rank3/stdout.log": a log's name relative to the run directory, for the messages.
std::string LogName(const std::string& path) {
  const std::filesystem::path p(path);
  return (p.parent_path().filename() / p.filename()).string();
}

struct Rank {
  const RankSpec* spec = nullptr;
  SpawnedProcess proc;
  RankOutcome outcome;
  Stream out, err;
  LineSplitter agent_lines;  // of the agent's pipe
  bool running() const { return proc.pid > 0 && !outcome.exited; }
};

}  // namespace

// One Run of the supervisor: owns every descriptor it opens, so an exception closes them too.
class Supervisor::Attempt {
 public:
  Attempt(Supervisor& sup, const std::vector<RankSpec>& specs)
      : sup_(sup),
        ep_(Checked(::epoll_create1(EPOLL_CLOEXEC), "epoll_create1")),
        tick_fd_(Checked(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK), "timerfd")),
        grace_fd_(
            Checked(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK), "timerfd")),
        ranks_(specs.size()) {
    sigset_t sigs = g_handled;
    sig_fd_ = Checked(::signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK), "signalfd");
    Watch(sig_fd_.get(), Tag(kSignal));
    Watch(sup_.stop_fd_.get(), Tag(kStop));
    Watch(tick_fd_.get(), Tag(kTick));
    Watch(grace_fd_.get(), Tag(kGrace));
    ArmTimer(tick_fd_.get(), sup_.options_.tick, sup_.options_.tick);
    for (size_t i = 0; i < specs.size(); ++i) ranks_[i].spec = &specs[i];
  }

  // Starts every rank; when one cannot start, kills and reaps those that did, then rethrows.
  void StartAll() {
    try {
      for (size_t i = 0; i < ranks_.size(); ++i) Start(i);
    } catch (...) {
      KillAll(SIGKILL);
      for (auto& r : ranks_)
        if (r.proc.pid > 0) sup_.spawner_->Reap(r.proc.pid);
      throw;
    }
  }

  // Blocks until every rank has exited.
  void Loop() {
    while (running_ > 0) {
      epoll_event events[32];
      int n = ::epoll_wait(ep_.get(), events, 32, -1);
      if (n < 0 && errno == EINTR) continue;
      for (int e = 0; e < n; ++e) Dispatch(events[e].data.u64);
      if (changed_) Changed();
    }
  }

  // Tells on_change how the attempt stands now.
  void Changed() {
    changed_ = false;
    if (!sup_.on_change) return;
    AttemptResult progress = result_;
    for (const auto& r : ranks_) progress.ranks.push_back(r.outcome);
    sup_.on_change(progress);
  }

  // The outcomes; the pipes a grandchild may still hold are closed here, not waited for.
  AttemptResult Finish() {
    for (auto& r : ranks_) result_.ranks.push_back(r.outcome);
    std::string cut;
    for (auto& r : ranks_) {
      for (const Stream* st : {&r.out, &r.err}) {
        if (st->log_errno == 0) continue;
        result_.truncated_logs.push_back(st->log_name);
        cut += (cut.empty() ? "" : ", ") + st->log_name + " at " + std::to_string(st->logged) +
               " bytes (" + std::strerror(st->log_errno) + ")";
      }
    }
    if (!cut.empty()) {
      // Said once, after the attempt: the output itself went on to the console.
      const std::string& dir = ranks_.front().spec->rank_dir;
      WriteAll(sup_.options_.console_err, "dlaunch: logs cut short under " +
                                              dir.substr(0, dir.find_last_of('/')) + ": " + cut +
                                              "; the output after that was not logged\n");
    }
    return std::move(result_);
  }

 private:
  void Watch(int fd, uint64_t tag) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    ::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd, &ev);
  }
  void Unwatch(int fd) { ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, fd, nullptr); }

  void Start(size_t i) {
    Rank& r = ranks_[i];
    const RankSpec& spec = *r.spec;
    const SupervisorOptions& o = sup_.options_;
    const bool console =
        !o.quiet && (o.console_ranks.empty() || o.console_ranks.count(spec.rank)) &&
        (o.console_local_ranks.empty() || o.console_local_ranks.count(spec.local_rank));
    const auto off = o.off_console.find(spec.local_rank);
    const int off_bits = off == o.off_console.end() ? 0 : off->second;
    r.out.console = console && !(off_bits & 1);
    r.err.console = console && !(off_bits & 2);
    const rundir::RankDir dir(spec.rank_dir);
    if (!o.stdout_filters.empty()) {
      r.out.filters = &o.stdout_filters;
      r.out.filtered = OpenLog(dir.filtered_stdout_log());
    }
    if (!o.stderr_filters.empty()) {
      r.err.filters = &o.stderr_filters;
      r.err.filtered = OpenLog(dir.filtered_stderr_log());
    }
    r.out.log = OpenLog(dir.stdout_log());
    r.err.log = OpenLog(dir.stderr_log());
    r.out.log_name = LogName(dir.stdout_log());
    r.err.log_name = LogName(dir.stderr_log());
    r.err.is_err = true;
    r.outcome.rank = spec.rank;
    r.outcome.local_rank = spec.local_rank;
    r.outcome.start_unix_ms = base::UnixMillis();
    base::UniqueFd cgroup = sup_.janitor_->PrepareRank(spec.rank);
    ProcessSpec process = spec.process;
    process.cgroup_procs_fd = cgroup.get();
    r.proc = sup_.spawner_->Spawn(process);
    sup_.janitor_->RankStarted(r.proc.pid);
    r.out.pipe = &r.proc.stdout_fd;
    r.err.pipe = &r.proc.stderr_fd;
    r.outcome.pid = r.proc.pid;
    ++running_;
    sup_.SetLive(i, LiveRank{spec.rank, r.proc.pid, base::UnixMillis(), false, false, {}});
    Watch(r.proc.pidfd.get(), Tag(kPid, i));
    Watch(r.proc.stdout_fd.get(), Tag(kOut, i));
    Watch(r.proc.stderr_fd.get(), Tag(kErr, i));
    if (r.proc.agent_fd) Watch(r.proc.agent_fd.get(), Tag(kAgent, i));
  }

  void Dispatch(uint64_t tag) {
    const auto source = static_cast<Source>(tag >> 32);
    const size_t i = tag & 0xffffffffu;
    switch (source) {
      case kPid:
        if (!ranks_[i].outcome.exited) OnExit(i);
        break;
      case kOut:
        Pump(i, ranks_[i].out);
        break;
      case kErr:
        Pump(i, ranks_[i].err);
        break;
      case kAgent:
        PumpAgent(i);
        break;
      case kSignal:
        OnSignals();
        break;
      case kStop: {
        DrainCounter(sup_.stop_fd_.get());
        std::vector<int> kill_now;
        {
          std::lock_guard<std::mutex> lock(sup_.stop_mu_);
          result_.stop_code = sup_.stop_code_;
          result_.stop_reason = sup_.stop_reason_;
          kill_now = sup_.stop_kill_now_;
        }
        BeginTeardown();
        for (auto& r : ranks_) {
          const bool now =
              std::find(kill_now.begin(), kill_now.end(), r.spec->rank) != kill_now.end();
          if (now && r.running()) sup_.spawner_->SignalGroup(r.proc.pid, SIGKILL);
        }
        break;
      }
      case kTick:
        DrainCounter(tick_fd_.get());
        if (sup_.on_tick && !tearing_down_) sup_.on_tick();
        break;
      case kGrace:
        DrainCounter(grace_fd_.get());
        KillAll(SIGKILL);
        break;
    }
  }

  // Copies what the pipe holds now to the log and, as whole lines, to the console.
  void Pump(size_t i, Stream& s) {
    Rank& r = ranks_[i];
    if (!*s.pipe) return;
    char buf[65536];
    std::vector<std::string> lines;
    bool open = true;
    for (;;) {
      ssize_t n = ::read(s.pipe->get(), buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;  // EAGAIN: drained for now
      if (n == 0) {
        open = false;
        break;
      }
      Log(s, std::string_view(buf, n));
      if (!s.is_err && r.spec->rank == sup_.options_.document_rank) {
        WriteAll(sup_.options_.console_out, std::string_view(buf, n));
        sup_.TouchLive(i);
        continue;
      }
      s.lines.Feed(std::string_view(buf, n), &lines);
    }
    if (!open || r.outcome.exited) {
      if (auto rest = s.lines.Flush()) lines.push_back(*rest);
    }
    if (!lines.empty()) {
      sup_.TouchLive(i);
      if (s.is_err) KeepTail(lines, &r.outcome.stderr_tail);
      if (s.filters) Duplicate(s, lines);
      if (s.console) {
        const SupervisorOptions& o = sup_.options_;
        const bool to_err = s.is_err || o.document_rank >= 0;
        const std::string& prefix = r.spec->console_prefix;
        WriteAll(to_err ? o.console_err : o.console_out,
                 PrefixLines(prefix.empty() ? DefaultLinePrefix(r.spec->rank) : prefix, lines));
      }
    }
    if (!open) {
      Unwatch(s.pipe->get());
      s.pipe->reset();
    }
  }

  // Keeps the last whole line of the agent's pipe (a heartbeat) for Live().
  void PumpAgent(size_t i) {
    Rank& r = ranks_[i];
    base::UniqueFd& pipe = r.proc.agent_fd;
    if (!pipe) return;
    char buf[16384];
    std::vector<std::string> lines;
    bool open = true;
    for (;;) {
      const ssize_t n = ::read(pipe.get(), buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      if (n == 0) {
        open = false;
        break;
      }
      r.agent_lines.Feed(std::string_view(buf, n), &lines);
    }
    if (!lines.empty()) sup_.SetAgentLine(i, std::move(lines.back()));
    if (!open) {
      Unwatch(pipe.get());
      pipe.reset();
    }
  }

  // The lines holding one of the stream's filters, to its filtered log (best effort: the whole
  // output is in the stream's own log).
  static void Duplicate(const Stream& s, const std::vector<std::string>& lines) {
    std::vector<std::string> picked;
    for (const std::string& l : lines) {
      if (std::any_of(s.filters->begin(), s.filters->end(),
                      [&](const std::string& f) { return l.find(f) != std::string::npos; })) {
        picked.push_back(l);
      }
    }
    if (!picked.empty() && s.filtered) WriteAll(s.filtered.get(), PrefixLines("", picked));
  }

  // The last lines of a rank's stderr, each cut to kTailLineBytes.
  static void KeepTail(const std::vector<std::string>& lines, std::vector<std::string>* tail) {
    constexpr size_t kTailLineBytes = 2000;
    for (const std::string& l : lines) tail->push_back(l.substr(0, kTailLineBytes));
    if (tail->size() > RankOutcome::kStderrTailLines) {
      tail->erase(tail->begin(), tail->end() - RankOutcome::kStderrTailLines);
    }
  }

  // Appends to the stream's log until a write fails (a full disk): from then on the log stays as
  // it is, whole lines or not, and Finish names it.
  void Log(Stream& s, std::string_view data) {
    if (s.log_errno != 0) return;
    while (!data.empty()) {
      const ssize_t n = ::write(s.log.get(), data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        s.log_errno = n < 0 ? errno : ENOSPC;
        return;
      }
      s.logged += static_cast<uint64_t>(n);
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  void OnExit(size_t i) {
    Rank& r = ranks_[i];
    int status = sup_.spawner_->Reap(r.proc.pid);
    r.outcome.exited = true;
    r.outcome.end_unix_ms = base::UnixMillis();
    if (WIFSIGNALED(status)) {
      r.outcome.signal = WTERMSIG(status);
    } else {
      r.outcome.exit_code = WEXITSTATUS(status);
    }
    Unwatch(r.proc.pidfd.get());
    r.proc.pidfd.reset();
    // Output written before the exit is in the pipes now; take it before judging the exit.
    Pump(i, r.out);
    Pump(i, r.err);
    --running_;
    changed_ = true;
    sup_.MarkExited(i, r.outcome.signal != 0 || r.outcome.exit_code != 0);
    // The rank's own children (a shell pipeline, python workers) go with it: its process group,
    // and its cgroup, which also holds those that left the group.
    sup_.spawner_->SignalGroup(r.proc.pid, SIGKILL);
    sup_.janitor_->RankExited(r.spec->rank, r.proc.pid);
    // A scheduler signals every process of the job at once (scancel): a rank ended by SIGTERM,
    // SIGINT or SIGHUP before the launcher saw its own copy is an interruption, not a failure.
    const int sig = r.outcome.signal;
    pollfd own{sig_fd_.get(), POLLIN, 0};
    if ((sig == SIGTERM || sig == SIGINT || sig == SIGHUP) && !tearing_down_ &&
        ::poll(&own, 1, kOwnSignalWaitMs) == 1) {
      OnSignals();
    }
    if (!r.outcome.ok() && !result_.first_failure && !tearing_down_) {
      r.outcome.torn_down = false;
      result_.first_failure = i;
      BeginTeardown();
    }
  }

  void OnSignals() {
    signalfd_siginfo info;
    while (::read(sig_fd_.get(), &info, sizeof(info)) == sizeof(info)) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGUSR1 || sig == SIGUSR2) {
        // Forwarded only: a built-in `train` rank takes SIGUSR1 as "checkpoint now, go on".
        KillAll(sig);
        continue;
      }
      if (++interrupts_ > 1) {
        KillAll(SIGKILL);  // a second Ctrl-C means now
        continue;
      }
      result_.interrupted_by = sig;
      TearDown(sig);
    }
  }

  // After a failure or a stop request: SIGTERM once.
  void BeginTeardown() {
    if (!tearing_down_) TearDown(SIGTERM);
  }

  // Sends `sig` (SIGTERM, or the signal that interrupted dlaunch) to every rank still running,
  // and SIGKILL after the grace period. SIGCONT follows `sig`: a stopped rank would otherwise
  // hold its SIGTERM, and the teardown, for the whole grace period.
  void TearDown(int sig) {
    tearing_down_ = true;
    changed_ = true;
    for (auto& r : ranks_) {
      if (!r.running()) continue;
      r.outcome.torn_down = true;
      const std::optional<base::ProcStat> st = base::ReadProcStat(r.proc.pid);
      r.outcome.stopped_at_teardown = st && st->state == 'T';
    }
    KillAll(sig);
    KillAll(SIGCONT);
    ArmTimer(grace_fd_.get(), sup_.options_.grace_period, std::chrono::milliseconds(0));
  }

  void KillAll(int sig) {
    for (auto& r : ranks_)
      if (r.running()) sup_.spawner_->SignalGroup(r.proc.pid, sig);
  }

  Supervisor& sup_;
  base::UniqueFd ep_, sig_fd_, tick_fd_, grace_fd_;
  std::vector<Rank> ranks_;
  size_t running_ = 0;
  bool tearing_down_ = false;
  bool changed_ = false;  // since on_change was last called
  int interrupts_ = 0;
  AttemptResult result_;
};

void BlockForwardedSignals() {
  sigset_t set = ForwardableSet();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

std::vector<int> ParseSignalList(const std::string& list) {
  std::vector<int> signals;
  std::stringstream in(list);
  std::string name;
  while (std::getline(in, name, ',')) {
    while (!name.empty() && name.front() == ' ') name.erase(name.begin());
    while (!name.empty() && name.back() == ' ') name.pop_back();
    if (name.empty()) continue;
    const int sig = base::SignalNumber(name);
    if (std::find(std::begin(kForwardable), std::end(kForwardable), sig) ==
        std::end(kForwardable)) {
      throw UsageError("--signals-to-handle: cannot handle '" + name + "' (choose from " +
                       kDefaultHandledSignals + ")");
    }
    signals.push_back(sig);
  }
  return signals;
}

void HandleSignals(const std::vector<int>& signals) {
  sigemptyset(&g_handled);
  for (int s : signals) sigaddset(&g_handled, s);
  sigset_t others;
  sigemptyset(&others);
  for (int s : kForwardable)
    if (!sigismember(&g_handled, s)) sigaddset(&others, s);
  ::pthread_sigmask(SIG_UNBLOCK, &others, nullptr);
}

sigset_t JobEndingSignals() {
  sigset_t set = g_handled;
  sigdelset(&set, SIGUSR1);
  sigdelset(&set, SIGUSR2);
  return set;
}

Supervisor::Supervisor(ProcessSpawner* spawner, SupervisorOptions options)
    : spawner_(spawner),
      options_(std::move(options)),
      stop_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

void Supervisor::RequestStop(int exit_code, const std::string& reason, std::vector<int> kill_now) {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stop_code_) return;
    stop_code_ = exit_code;
    stop_reason_ = reason;
    stop_kill_now_ = std::move(kill_now);
  }
  uint64_t one = 1;
  (void)!::write(stop_fd_.get(), &one, sizeof(one));
}

std::vector<Supervisor::LiveRank> Supervisor::Live() const {
  std::lock_guard<std::mutex> lock(live_mu_);
  return live_;
}

void Supervisor::SetLive(size_t index, const LiveRank& live) {
  std::lock_guard<std::mutex> lock(live_mu_);
  live_[index] = live;
}

void Supervisor::TouchLive(size_t index) {
  std::lock_guard<std::mutex> lock(live_mu_);
  live_[index].last_output_unix_ms = base::UnixMillis();
}

void Supervisor::SetAgentLine(size_t index, std::string line) {
  std::lock_guard<std::mutex> lock(live_mu_);
  live_[index].agent_line = std::move(line);
}

void Supervisor::MarkExited(size_t index, bool failed) {
  std::lock_guard<std::mutex> lock(live_mu_);
  live_[index].exited = true;
  live_[index].failed = failed;
}

AttemptResult Supervisor::Run(const std::vector<RankSpec>& specs) {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_code_.reset();
    stop_reason_.clear();
    stop_kill_now_.clear();
    DrainCounter(stop_fd_.get());
  }
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    live_.assign(specs.size(), LiveRank{0, -1, 0, false, false, {}});
  }
  if (!janitor_) janitor_ = std::make_unique<RankJanitor>();
  Attempt attempt(*this, specs);
  attempt.StartAll();
  attempt.Changed();
  attempt.Loop();
  return attempt.Finish();
}

}  // namespace dlaunch::launcher
