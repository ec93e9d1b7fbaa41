// Runs one attempt of a job: spawns the ranks, captures their output, sees exits and signals as
// events on one epoll loop, and tears everything down on the first failure.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/base/unique_fd.h"
#include "launcher/supervision/process_spawner.h"
#include "launcher/supervision/rank_janitor.h"

namespace dlaunch::launcher {

struct RankSpec {
  int rank = 0;
  int local_rank = 0;
  ProcessSpec process;
  std::string rank_dir;        // stdout.log and stderr.log go here
  std::string console_prefix;  // in front of each console line; "" = "[rank R] "
};

struct RankOutcome {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  int64_t start_unix_ms = 0;
  int64_t end_unix_ms = 0;
  bool exited = false;
  int exit_code = -1;      // when it exited normally
  int signal = 0;          // when a signal ended it
  bool torn_down = false;  // ended by the launcher's teardown, not by itself
  // Found stopped (process state T, a SIGSTOP) when the teardown began: it had stopped answering
  // before the failure that ended the attempt, so it may be what the others waited for.
  bool stopped_at_teardown = false;
  std::string cause;  // why it failed, when the launcher knows: "FileTimer scope 'x' expired"
  // Its last stderr lines (at most kStderrTailLines), kept in memory: the root-cause block shows
  // them even when stderr.log could not be written.
  std::vector<std::string> stderr_tail;
  static constexpr size_t kStderrTailLines = 10;

  bool ok() const { return exited && signal == 0 && exit_code == 0; }
};

struct AttemptResult {
  std::vector<RankOutcome> ranks;
  std::optional<size_t> first_failure;  // index into ranks
  int interrupted_by = 0;               // the signal that stopped dlaunch, if any
  std::optional<int> stop_code;         // set by RequestStop
  std::string stop_reason;
  // Logs a full disk (or another write error) cut short, as "rank1/stdout.log". The rank's output
  // still reached the console; the job's outcome does not change.
  std::vector<std::string> truncated_logs;
};

struct SupervisorOptions {
  std::chrono::milliseconds grace_period{30000};
  std::chrono::milliseconds tick{250};
  bool quiet = false;
  std::set<int> console_ranks;        // empty: all
  std::set<int> console_local_ranks;  // torchrun's --local-ranks-filter; empty: all
  // torchrun's -r without -t: local rank -> its streams (1 stdout, 2 stderr) kept off the console
  std::map<int, int> off_console;
  // torchrun's --duplicate-std{out,err}-filters: lines holding one of them are also written to
  // rank<R>/filtered_std{out,err}.log
  std::vector<std::string> stdout_filters, stderr_filters;
  int console_out = 1;
  int console_err = 2;
  // The rank whose stdout is a document (preflight --json/--csv): its stdout bytes go to
  // console_out as they are, without prefixes and even when quiet, and every other console line
  // goes to console_err, so that `dlaunch ... > file` holds the document alone. -1: none.
  int document_rank = -1;
};

// The signals dlaunch forwards to its ranks. Block them in every thread before any thread starts
// (call this first in main) so that the supervisor's signalfd receives them.
void BlockForwardedSignals();

// The signals dlaunch can catch and forward (torchrun's --signals-to-handle), by default all of
// them: SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded and end the job (exit 128+n); SIGUSR1
// and SIGUSR2 are forwarded only, and the job goes on.
inline constexpr char kDefaultHandledSignals[] = "SIGINT,SIGTERM,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2";
// "SIGTERM,INT,USR1" -> the signal numbers; throws UsageError naming one it cannot handle.
std::vector<int> ParseSignalList(const std::string& list);
// From now on only `signals` are caught and forwarded; the other forwardable ones take their
// default action on dlaunch again (SIGUSR1 ends it, and its ranks with it). Call before any
// thread starts, after BlockForwardedSignals.
void HandleSignals(const std::vector<int>& signals);
// Of the signals HandleSignals chose, those that end the job: SIGINT, SIGTERM, SIGHUP, SIGQUIT.
sigset_t JobEndingSignals();

class Supervisor {
 public:
  Supervisor(ProcessSpawner* spawner, SupervisorOptions options);

  // Blocks until every rank of the attempt has exited. Throws Error when a rank cannot be
  // started (the ranks already started are killed first).
  AttemptResult Run(const std::vector<RankSpec>& ranks);

  // Thread-safe, does not block: ends the attempt as a failure with `exit_code`. The ranks in
  // `kill_now` (found stopped or hung, their stacks already taken) get SIGKILL at once instead of
  // SIGTERM and the grace period.
  void RequestStop(int exit_code, const std::string& reason, std::vector<int> kill_now = {});

  // Called on the loop thread every `tick` while the attempt runs; must not block for long.
  std::function<void()> on_tick;
  // Called on the loop thread when the attempt's picture changes: once every rank started, when
  // a rank exits, when the teardown begins. `progress.ranks` holds every rank as it stands. Must
  // not block for long (a small file rewrite).
  std::function<void(const AttemptResult& progress)> on_change;

  // Thread-safe: per rank (by index), the pid and the time of its last output line.
  struct LiveRank {
    int rank;
    pid_t pid;
    int64_t last_output_unix_ms;
    bool exited;
    bool failed = false;  // exited with a non-zero code or by a signal
    // The last whole line the Python agent sent through its pipe (ProcessSpec::agent_pipe): a
    // heartbeat it could not write to heartbeat.json. "" when none came.
    std::string agent_line;
  };
  std::vector<LiveRank> Live() const;

 private:
  class Attempt;  // one Run: its ranks, descriptors and event loop

  // The Attempt's updates of live_, by rank index.
  void SetLive(size_t index, const LiveRank& live);
  void TouchLive(size_t index);
  void SetAgentLine(size_t index, std::string line);
  void MarkExited(size_t index, bool failed);

  ProcessSpawner* spawner_;
  SupervisorOptions options_;
  std::unique_ptr<RankJanitor> janitor_;  // from the first Run on
  base::UniqueFd stop_fd_;
  std::mutex stop_mu_;
  std::optional<int> stop_code_;
  std::string stop_reason_;
  std::vector<int> stop_kill_now_;
  mutable std::mutex live_mu_;
  std::vector<LiveRank> live_;
};

}  // namespace dlaunch::launcher
