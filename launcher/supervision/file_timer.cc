#include "launcher/supervision/file_timer.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/base/format.h"
#include "core/base/proc.h"
#include "core/error.h"
#include "launcher/supervision/log_capture.h"

namespace dlaunch::launcher {
namespace {

// Pids with timers that the server follows at once; past that, acquires are refused.
constexpr size_t kMaxTracked = 1024;
// The refusals printed one by one; the rest are counted.
constexpr int kRefusalsSaid = 10;

double NowUnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Printable ASCII, at most `max` characters: a rank's text on the launcher's console.
std::string Printable(std::string_view s, size_t max = 120) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > max) out += "...";
  return out;
}

// The parent of `pid` from /proc/<pid>/stat; 0 when it cannot be read.
pid_t ParentPid(pid_t pid) {
  const std::optional<base::ProcStat> st = base::ReadProcStat(pid);
  return st ? st->ppid : 0;
}

int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

bool PidfdSignal(int pidfd, int sig) {
  return ::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) == 0;
}

}  // namespace

std::optional<TimerRequest> ParseTimerRequest(std::string_view line, std::string* problem) {
  const nlohmann::json j =
      nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  auto fail = [&](const std::string& why) -> std::optional<TimerRequest> {
    *problem = why;
    return std::nullopt;
  };
  if (!j.is_object()) return fail("not a JSON object");
  const auto pid = j.find("pid");
  const auto scope = j.find("scope_id");
  const auto expiration = j.find("expiration_time");
  const auto sig = j.find("signal");
  if (pid == j.end() || !pid->is_number_integer()) return fail("no integer 'pid'");
  if (scope == j.end() || !scope->is_string()) return fail("no string 'scope_id'");
  if (expiration == j.end() || !expiration->is_number()) return fail("no number 'expiration_time'");
  if (sig == j.end() || !sig->is_number_integer()) return fail("no integer 'signal'");
  TimerRequest r;
  const int64_t p = pid->get<int64_t>();
  if (p <= 0 || p > INT_MAX) return fail("pid " + std::to_string(p) + " is not a process");
  const int64_t s = sig->get<int64_t>();
  if (s > SIGRTMAX) return fail("signal " + std::to_string(s) + " is not a signal");
  r.pid = static_cast<pid_t>(p);
  r.scope = scope->get<std::string>();
  r.expiration_unix_s = expiration->get<double>();
  if (!std::isfinite(r.expiration_unix_s)) return fail("'expiration_time' is not finite");
  r.signal = s < 0 ? 0 : static_cast<int>(s);
  return r;
}

void TimerTable::Apply(const TimerRequest& request) {
  const auto key = std::make_pair(request.pid, request.scope);
  if (request.release()) {
    timers_.erase(key);
  } else {
    timers_[key] = request;
  }
}

std::vector<TimerTable::Expired> TimerTable::TakeExpired(double now_unix_s) {
  // Per pid, the earliest expired timer with a signal (torch's server: expired timers in the
  // order of their expiry, the first with a positive signal).
  std::map<pid_t, const TimerRequest*> first;
  std::vector<pid_t> expired_pids;
  for (const auto& [key, t] : timers_) {
    if (t.expiration_unix_s > now_unix_s) continue;
    if (expired_pids.empty() || expired_pids.back() != t.pid) expired_pids.push_back(t.pid);
    if (t.signal <= 0) continue;
    const TimerRequest*& f = first[t.pid];
    if (!f || t.expiration_unix_s < f->expiration_unix_s) f = &t;
  }
  std::vector<Expired> out;
  for (const auto& [pid, t] : first) out.push_back(Expired{pid, t->scope, t->signal});
  for (pid_t pid : expired_pids) Forget(pid);
  return out;
}

void TimerTable::Forget(pid_t pid) {
  auto it = timers_.lower_bound(std::make_pair(pid, std::string()));
  while (it != timers_.end() && it->first.first == pid) it = timers_.erase(it);
}

std::optional<double> TimerTable::NextExpiry() const {
  std::optional<double> next;
  for (const auto& [key, t] : timers_)
    if (!next || t.expiration_unix_s < *next) next = t.expiration_unix_s;
  return next;
}

bool TimerTable::Has(pid_t pid) const {
  auto it = timers_.lower_bound(std::make_pair(pid, std::string()));
  return it != timers_.end() && it->first.first == pid;
}

std::optional<int> RankOwning(pid_t pid, const std::map<pid_t, int>& ranks) {
  for (int step = 0; step < 64 && pid > 1; ++step) {
    if (auto it = ranks.find(pid); it != ranks.end()) return it->second;
    pid = ParentPid(pid);
  }
  return std::nullopt;
}

std::string DescribeTimerKill(const TimerKill& kill) {
  return "FileTimer scope '" + Printable(kill.scope) + "' expired";
}

void AttachTimerKills(const std::vector<TimerKill>& kills, std::vector<RankOutcome>* ranks) {
  for (const TimerKill& k : kills) {
    for (RankOutcome& r : *ranks) {
      if (r.rank == k.rank && !r.ok() && r.cause.empty()) r.cause = DescribeTimerKill(k);
    }
  }
}

FileTimerServer::FileTimerServer(RankPids ranks, int console_err)
    : ranks_(std::move(ranks)), console_err_(console_err) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string parent = tmp && *tmp ? tmp : "/tmp";
  std::string templ = parent + "/dlaunch-timer-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    throw UsageError("TORCHELASTIC_ENABLE_FILE_TIMER=1: cannot make the FileTimer's folder in " +
                     parent + " (TMPDIR): " + std::strerror(errno));
  }
  dir_ = templ;
  path_ = dir_ + "/timer.fifo";
  auto fail = [&](const char* what) {
    const std::string why = std::strerror(errno);
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
    throw Error(ErrorKind::kInternal, std::string("FileTimer: ") + what + " " + path_ + ": " + why);
  };
  if (::mkfifo(path_.c_str(), 0600) != 0) fail("cannot make the FIFO");
  read_fd_.reset(::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!read_fd_) fail("cannot open");
  // A writer of our own: the FIFO never reads as closed between two clients, so poll does not
  // spin on POLLHUP, and a client's non-blocking open always finds a reader.
  keep_fd_.reset(::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  if (!keep_fd_) fail("cannot open");
  stop_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_fd_) fail("eventfd for");
  thread_ = std::thread([this] { Loop(); });
}

FileTimerServer::~FileTimerServer() {
  uint64_t one = 1;
  (void)!::write(stop_fd_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  ::unlink(path_.c_str());
  ::rmdir(dir_.c_str());
  if (refused_ > kRefusalsSaid) {
    Say("dlaunch: FileTimer refused " + std::to_string(refused_) + " requests in all");
  }
}

std::vector<TimerKill> FileTimerServer::TakeKills() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(kills_, {});
}

int FileTimerServer::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

void FileTimerServer::Say(const std::string& line) const { WriteAll(console_err_, line + "\n"); }

void FileTimerServer::Loop() {
  for (;;) {
    std::vector<pollfd> fds = {{stop_fd_.get(), POLLIN, 0}, {read_fd_.get(), POLLIN, 0}};
    std::vector<pid_t> pids;
    for (const auto& [pid, t] : tracked_) {
      fds.push_back({t.pidfd.get(), POLLIN, 0});
      pids.push_back(pid);
    }
    // Wake for the next expiry; at least once a second while timers run, for a wall clock that
    // was set forward.
    int timeout_ms = -1;
    if (const auto next = table_.NextExpiry()) {
      const double left_ms = std::ceil((*next - NowUnixSeconds()) * 1000);
      timeout_ms = static_cast<int>(std::clamp(left_ms, 0.0, 1000.0));
    }
    const int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) return;
    if (fds[0].revents) return;
    // Exits before requests: a pid number used again by a new process starts afresh.
    for (size_t i = 0; i < pids.size(); ++i) {
      if (fds[i + 2].revents == 0) continue;
      table_.Forget(pids[i]);  // gone: its timers go with it, as in torch's server
      tracked_.erase(pids[i]);
    }
    if (fds[1].revents & POLLIN) ReadFifo();
    Reap();
  }
}

void FileTimerServer::ReadFifo() {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(read_fd_.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // EAGAIN: drained (our own writer keeps it from reading end-of-file)
    std::string_view data(buf, static_cast<size_t>(n));
    while (!data.empty()) {
      const size_t nl = data.find('\n');
      const std::string_view piece = data.substr(0, nl);
      data.remove_prefix(nl == std::string_view::npos ? data.size() : nl + 1);
      if (!overlong_) {
        partial_.append(piece);
        if (partial_.size() > kMaxTimerLine) {
          Refuse("a line longer than " + std::to_string(kMaxTimerLine) + " bytes");
          partial_.clear();
          overlong_ = true;
        }
      }
      if (nl == std::string_view::npos) break;
      if (!overlong_) Handle(partial_);
      partial_.clear();
      overlong_ = false;
    }
  }
}

void FileTimerServer::Handle(std::string_view line) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
  std::string problem;
  const std::optional<TimerRequest> r = ParseTimerRequest(line, &problem);
  if (!r) return Refuse("'" + Printable(line, 80) + "': " + problem);
  if (r->release()) {
    table_.Apply(*r);
    if (!table_.Has(r->pid)) tracked_.erase(r->pid);
    return;
  }
  if (!tracked_.count(r->pid)) {
    if (tracked_.size() >= kMaxTracked) {
      return Refuse("more than " + std::to_string(kMaxTracked) + " processes with timers");
    }
    // The pidfd first: the process checked below is then the one signalled later, whatever
    // happens to its pid number meanwhile.
    base::UniqueFd pidfd(PidfdOpen(r->pid));
    if (!pidfd) return Refuse("pid " + std::to_string(r->pid) + " is not running");
    const std::map<pid_t, int> ranks = ranks_();
    const std::optional<int> rank = RankOwning(r->pid, ranks);
    if (!rank) {
      return Refuse("pid " + std::to_string(r->pid) +
                    " is neither a rank of this node nor a child of one");
    }
    tracked_.emplace(r->pid, Tracked{*rank, ranks.count(r->pid) > 0, std::move(pidfd)});
  }
  table_.Apply(*r);
}

void FileTimerServer::Refuse(const std::string& why) {
  int count;
  {
    std::lock_guard<std::mutex> lock(mu_);
    count = ++refused_;
  }
  if (count <= kRefusalsSaid) Say("dlaunch: FileTimer request refused: " + why);
  if (count == kRefusalsSaid) Say("dlaunch: FileTimer: further refusals are only counted");
}

void FileTimerServer::Reap() {
  for (const TimerTable::Expired& e : table_.TakeExpired(NowUnixSeconds())) {
    auto it = tracked_.find(e.pid);
    if (it == tracked_.end()) continue;
    const TimerKill kill{it->second.rank, e.pid, e.scope, e.signal};
    {
      // Kept before the signal goes: the supervisor may see the rank's end, and the agent take
      // the kills, before this thread runs again.
      std::lock_guard<std::mutex> lock(mu_);
      kills_.push_back(kill);
    }
    if (!PidfdSignal(it->second.pidfd.get(), e.signal)) {  // gone already: not the timer's doing
      std::lock_guard<std::mutex> lock(mu_);
      if (!kills_.empty()) kills_.pop_back();  // ours, unless TakeKills took it meanwhile
      continue;
    }
    const std::string who = it->second.is_rank
                                ? "rank " + std::to_string(kill.rank)
                                : "pid " + std::to_string(e.pid) + " (a child of rank " +
                                      std::to_string(kill.rank) + ")";
    Say("dlaunch: " + who + " was killed by its FileTimer: scope '" + Printable(e.scope) +
        "' expired (" + base::SignalName(e.signal) + ")");
  }
  // Expired timers without a signal went too: stop following their pids.
  for (auto it = tracked_.begin(); it != tracked_.end();)
    it = table_.Has(it->first) ? std::next(it) : tracked_.erase(it);
}

FileTimerServer::RankPids RunningRanksOf(const Supervisor* supervisor) {
  return [supervisor] {
    std::map<pid_t, int> ranks;
    for (const Supervisor::LiveRank& r : supervisor->Live())
      if (r.pid > 0 && !r.exited) ranks[r.pid] = r.rank;
    return ranks;
  };
}

void SetEnvEntry(std::vector<std::string>* env, const std::string& name, const std::string& value) {
  const std::string prefix = name + "=";
  auto it = std::find_if(env->begin(), env->end(),
                         [&](const std::string& kv) { return kv.rfind(prefix, 0) == 0; });
  if (it != env->end()) {
    *it = prefix + value;
  } else {
    env->push_back(prefix + value);
  }
}

}  // namespace dlaunch::launcher
