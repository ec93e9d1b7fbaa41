// Runs dlaunch as a real child process for tests: its output arrives line by line as events
// (poll on the pipes), never by sleeping.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "launcher/supervision/log_capture.h"
#include "launcher/supervision/process_spawner.h"

extern char** environ;

namespace dlaunch::testing {

class Launched {
 public:
  // Starts `argv` with this process's environment plus `extra_env` (KEY=VAL).
  explicit Launched(std::vector<std::string> argv, std::vector<std::string> extra_env = {}) {
    launcher::ProcessSpec spec;
    spec.argv = std::move(argv);
    for (char** e = environ; *e; ++e) spec.env.push_back(*e);
    for (auto& kv : extra_env) spec.env.push_back(kv);
    spawner_ = launcher::MakeForkExecSpawner();
    proc_ = spawner_->Spawn(spec);
  }
  ~Launched() {
    if (!reaped_) {
      ::kill(proc_.pid, SIGKILL);
      spawner_->SignalGroup(proc_.pid, SIGKILL);
      Wait(std::chrono::seconds(10));
    }
  }

  pid_t pid() const { return proc_.pid; }

  // Reads output until `pred` holds for the stdout lines seen so far, at most `timeout`.
  bool WaitFor(const std::function<bool(const std::vector<std::string>&)>& pred,
               std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred(out_lines)) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !Pump(left)) return pred(out_lines);
    }
    return true;
  }

  // Waits for exit (reading output meanwhile); returns the exit code, 128+signal for a signal,
  // or -1 on timeout.
  int Wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!reaped_) {
      pollfd p{proc_.pidfd.get(), POLLIN, 0};
      if (::poll(&p, 1, 0) == 1) {
        while (Pump(std::chrono::milliseconds(0))) {
        }
        int status = spawner_->Reap(proc_.pid);
        reaped_ = true;
        code_ = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        break;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return -1;
      Pump(left);
    }
    return code_;
  }

  std::vector<std::string> out_lines, err_lines;

  std::string err_text() const {
    std::string s;
    for (const auto& l : err_lines) s += l + "\n";
    return s;
  }

 private:
  // One poll round over stdout, stderr and the pidfd; false when nothing can happen any more.
  bool Pump(std::chrono::milliseconds timeout) {
    pollfd fds[3] = {{proc_.stdout_fd.get(), POLLIN, 0},
                     {proc_.stderr_fd.get(), POLLIN, 0},
                     {proc_.pidfd.get(), POLLIN, 0}};
    if (!proc_.stdout_fd && !proc_.stderr_fd) return false;
    int n = ::poll(fds, 3, static_cast<int>(timeout.count()));
    if (n <= 0) return false;
    bool progressed = false;
    for (int i = 0; i < 2; ++i) {
      base::UniqueFd& fd = i == 0 ? proc_.stdout_fd : proc_.stderr_fd;
      if (!fd || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[65536];
      ssize_t r = ::read(fd.get(), buf, sizeof(buf));
      if (r > 0) {
        (i == 0 ? out_ : err_).Feed(std::string_view(buf, r), i == 0 ? &out_lines : &err_lines);
        progressed = true;
      } else if (r == 0) {
        fd.reset();
        progressed = true;
      }
    }
    return progressed || (fds[2].revents & POLLIN) == 0;
  }

  std::unique_ptr<launcher::ProcessSpawner> spawner_;
  launcher::SpawnedProcess proc_;
  launcher::LineSplitter out_, err_;
  bool reaped_ = false;
  int code_ = -1;
};

// Watches processes exit through their pidfds, opened when constructed (before a kill, so a pid
// reused later is never mistaken for one of them). A process already gone counts as exited.
class ExitWatch {
 public:
  template <typename Pids>
  explicit ExitWatch(const Pids& pids) {
    for (pid_t pid : pids) {
      const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
      if (fd >= 0) fds_.push_back({fd, POLLIN, 0});
    }
  }
  ~ExitWatch() {
    for (auto& p : fds_) ::close(p.fd);
  }
  ExitWatch(const ExitWatch&) = delete;
  ExitWatch& operator=(const ExitWatch&) = delete;

  size_t watched() const { return fds_.size(); }
  // Blocks until every watched process has exited, at most `timeout`.
  bool AllExit(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    size_t gone = 0;
    while (gone < fds_.size()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || ::poll(fds_.data(), fds_.size(), left.count()) <= 0) break;
      gone = 0;
      for (auto& p : fds_) gone += (p.revents & POLLIN) ? 1 : 0;
    }
    return gone == fds_.size();
  }

 private:
  std::vector<pollfd> fds_;
};

// dlaunch (`bin`) as node `node` of a static two-node job of 2 ranks per node, over `endpoint`,
// with its run directory at `log_dir`/job.
inline std::vector<std::string> TwoNodeArgv(const std::string& bin, int node,
                                            const std::string& endpoint,
                                            const std::string& log_dir) {
  return {bin,
          "--nnodes",
          "2",
          "--node-rank",
          std::to_string(node),
          "--rdzv-endpoint",
          endpoint,
          "--nproc",
          "2",
          "--log-dir",
          log_dir,
          "--run-id",
          "job"};
}

// pids of the ranks, from their "ready PID" console lines (prefixed "[rank R] ", or
// "[HOST rank R] " on many nodes).
inline std::map<int, pid_t> ReadyPids(const std::vector<std::string>& lines) {
  std::map<int, pid_t> pids;
  std::regex re(R"(\[(?:\S+ )?rank (\d+)\] ready (\d+).*)");
  std::smatch m;
  for (const auto& l : lines)
    if (std::regex_match(l, m, re)) pids[std::stoi(m[1])] = std::stoi(m[2]);
  return pids;
}
inline auto ReadyCount(size_t n) {
  return [n](const std::vector<std::string>& lines) { return ReadyPids(lines).size() >= n; };
}

// The port of node 0's --metrics-port server, from its "metrics on http://127.0.0.1:P/metrics"
// line on `job`'s stderr; 0 when it did not come within `timeout`.
inline int WaitForMetricsPort(Launched& job, std::chrono::milliseconds timeout) {
  const std::regex said(R"(metrics on http://127\.0\.0\.1:(\d+)/metrics)");
  int port = 0;
  job.WaitFor(
      [&](const std::vector<std::string>&) {
        std::smatch m;
        for (const auto& l : job.err_lines) {
          if (std::regex_search(l, m, said)) port = std::stoi(m[1]);
        }
        return port > 0;
      },
      timeout);
  return port;
}

}  // namespace dlaunch::testing
