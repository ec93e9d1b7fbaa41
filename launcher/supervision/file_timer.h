// torchrun's FileTimer server (TORCHELASTIC_ENABLE_FILE_TIMER=1): a rank's
// torch.distributed.elastic.timer.FileTimerClient writes one JSON line per request into a FIFO
// that the launcher made and named in TORCHELASTIC_TIMER_FILE,
//   {"version": 1, "pid": 1234, "scope_id": "step", "expiration_time": 1764696000.5, "signal": 9}
// with expiration_time < 0 releasing the scope. When a scope expires, the launcher sends its
// signal to that pid. Only this node's ranks and their descendants can be signalled: a request
// naming any other pid, a malformed line or one longer than PIPE_BUF is refused with a line on
// stderr, and the server goes on.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/base/unique_fd.h"
#include "launcher/supervision/supervisor.h"

namespace dlaunch::launcher {

inline constexpr char kFileTimerEnableVar[] = "TORCHELASTIC_ENABLE_FILE_TIMER";
inline constexpr char kFileTimerFileVar[] = "TORCHELASTIC_TIMER_FILE";
// A client writes at most PIPE_BUF bytes at once (atomic on a FIFO); a longer line is refused.
inline constexpr size_t kMaxTimerLine = 4096;

struct TimerRequest {
  pid_t pid = 0;
  std::string scope;
  double expiration_unix_s = 0;  // < 0: release
  int signal = 0;                // <= 0: the scope's expiry signals nothing
  bool release() const { return expiration_unix_s < 0; }
};

// One line of the FIFO (without its newline). nullopt with `problem` set ("not JSON", "no
// integer 'pid'", "pid 0 is not a process", "signal 99 is not a signal") when it is not a request.
std::optional<TimerRequest> ParseTimerRequest(std::string_view line, std::string* problem);

// The timers as torch's server keeps them, by (pid, scope): pure logic, the clock passed in.
class TimerTable {
 public:
  struct Expired {
    pid_t pid;
    std::string scope;
    int signal;
  };
  // An acquire sets (pid, scope)'s timer, a release removes it.
  void Apply(const TimerRequest& request);
  // Every pid with a timer expired at `now_unix_s` loses all its timers; for those with a
  // positive signal, the earliest such timer is returned: the pid is to be signalled with it.
  std::vector<Expired> TakeExpired(double now_unix_s);
  // The pid is gone: its timers go too.
  void Forget(pid_t pid);
  // The earliest expiration time, nullopt without timers.
  std::optional<double> NextExpiry() const;
  bool Has(pid_t pid) const;
  size_t size() const { return timers_.size(); }

 private:
  std::map<std::pair<pid_t, std::string>, TimerRequest> timers_;
};

// The rank `pid` belongs to: the rank itself, or the rank found by walking up its parents
// (/proc/<pid>/stat, at most 64 steps). `ranks` maps running rank pids to ranks. Blocks for a
// few small reads of /proc.
std::optional<int> RankOwning(pid_t pid, const std::map<pid_t, int>& ranks);

// A timer's kill: the rank whose process (`pid`, the rank itself or a descendant) was signalled.
struct TimerKill {
  int rank = 0;
  pid_t pid = 0;
  std::string scope;
  int signal = 0;
};

// "FileTimer scope 'step' expired": the kill as summary.json and the root cause say it.
std::string DescribeTimerKill(const TimerKill& kill);
// Sets the cause of each failed rank that a timer killed (its own process or a descendant).
void AttachTimerKills(const std::vector<TimerKill>& kills, std::vector<RankOutcome>* ranks);

class FileTimerServer {
 public:
  // Running ranks by pid; called on the server's thread, so it must be thread-safe.
  using RankPids = std::function<std::map<pid_t, int>()>;
  // Makes a private folder ($TMPDIR/dlaunch-timer-XXXXXX, mode 0700) with the FIFO in it and
  // starts the server's thread. Throws UsageError when the folder cannot be made (TMPDIR),
  // Error(kInternal) when the FIFO cannot be opened.
  // `console_err`: where the kill and refusal lines go.
  explicit FileTimerServer(RankPids ranks, int console_err = 2);
  // Stops the thread (at once: it waits on an eventfd too) and removes the FIFO and its folder.
  ~FileTimerServer();
  FileTimerServer(const FileTimerServer&) = delete;
  FileTimerServer& operator=(const FileTimerServer&) = delete;

  // The FIFO, for TORCHELASTIC_TIMER_FILE.
  const std::string& path() const { return path_; }
  // The kills since the last call. Thread-safe, does not block.
  std::vector<TimerKill> TakeKills();
  // How many requests were refused so far. Thread-safe.
  int refused() const;

 private:
  struct Tracked {
    int rank;
    bool is_rank;          // the rank's own process, not a descendant
    base::UniqueFd pidfd;  // readable once the process is gone
  };
  void Loop();
  void ReadFifo();
  void Handle(std::string_view line);
  void Refuse(const std::string& why);
  void Reap();
  void Say(const std::string& line) const;

  RankPids ranks_;
  int console_err_;
  std::string dir_, path_;
  base::UniqueFd read_fd_, keep_fd_, stop_fd_;
  std::string partial_;
  bool overlong_ = false;  // discarding a line past kMaxTimerLine up to its newline
  TimerTable table_;
  std::map<pid_t, Tracked> tracked_;  // pids with timers
  mutable std::mutex mu_;
  std::vector<TimerKill> kills_;
  int refused_ = 0;
  std::thread thread_;
};

// The running ranks of `supervisor`'s attempt by pid (Supervisor::Live), for the server.
FileTimerServer::RankPids RunningRanksOf(const Supervisor* supervisor);

// Replaces `name`'s entry in a KEY=VAL environment, or appends one.
void SetEnvEntry(std::vector<std::string>* env, const std::string& name, const std::string& value);

}  // namespace dlaunch::launcher
