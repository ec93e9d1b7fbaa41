#include "launcher/diagnose/stack_capture.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <sstream>

#include "core/base/files.h"
#include "core/base/proc.h"
#include "core/run_dir/rank_logs.h"

namespace dlaunch::launcher {
namespace {

constexpr int kExecFailed = 127;
constexpr size_t kMaxOutput = 4 * 1024 * 1024;

bool IsEuStack(const std::string& tool) {
  const size_t slash = tool.rfind('/');
  return tool.compare(slash == std::string::npos ? 0 : slash + 1, 8, "eu-stack") == 0;
}

}  // namespace

const std::string& DefaultStackTool() {
  static const std::string tool = !base::FindExecutable("eu-stack").empty() ? "eu-stack" : "gdb";
  return tool;
}

std::string ProcessState(int pid) {
  const std::optional<base::ProcStat> st = base::ReadProcStat(pid);
  return st ? base::ProcStateWord(st->state) : "";
}

StackCapture CaptureStacks(int pid, std::chrono::milliseconds timeout, const std::string& tool) {
  const std::string& gdb_path = tool.empty() ? DefaultStackTool() : tool;
  const bool eu = IsEuStack(gdb_path);
  StackCapture result;
  result.process_state = ProcessState(pid);
  std::ostringstream text;
  text << "# native stacks of pid " << pid << " (process state "
       << (result.process_state.empty() ? "gone" : result.process_state) << ") via " << gdb_path
       << " -p " << pid << (eu ? "" : " -batch -ex \"thread apply all bt\"") << "\n";
  if (result.process_state.empty()) {
    text << "process " << pid << " no longer exists: no stacks\n";
    result.text = text.str();
    return result;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    text << "cannot capture stacks: pipe: " << std::strerror(errno) << "\n";
    result.text = text.str();
    return result;
  }
  const std::string pid_arg = std::to_string(pid);
  pid_t child = ::fork();
  if (child < 0) {
    text << "cannot capture stacks: fork: " << std::strerror(errno) << "\n";
    ::close(fds[0]);
    ::close(fds[1]);
    result.text = text.str();
    return result;
  }
  if (child == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::setpgid(0, 0);
    if (eu) {
      ::execlp(gdb_path.c_str(), gdb_path.c_str(), "-p", pid_arg.c_str(),
               static_cast<char*>(nullptr));
    } else {
      ::execlp(gdb_path.c_str(), gdb_path.c_str(), "-nx", "-p", pid_arg.c_str(), "-batch", "-ex",
               "set pagination off", "-ex", "thread apply all bt", static_cast<char*>(nullptr));
    }
    ::_exit(kExecFailed);
  }
  ::close(fds[1]);
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  char buf[65536];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    ssize_t got = ::read(fds[0], buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // gdb closed its output: it is done
    if (output.size() < kMaxOutput) output.append(buf, static_cast<size_t>(got));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(-child, SIGKILL);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kExecFailed && output.empty()) {
    text << (eu ? "eu-stack" : "gdb") << " not found (" << gdb_path
         << "): install elfutils or gdb to capture native stacks of hung ranks\n";
    result.text = text.str();
    return result;
  }
  text << output;
  if (timed_out) {
    text << "\n# " << (eu ? "eu-stack" : "gdb") << " did not finish within " << timeout.count()
         << " ms and was killed\n";
  }
  if (output.find("ptrace: Operation not permitted") != std::string::npos ||
      (eu && output.find("Operation not permitted") != std::string::npos)) {
    text << "\n# ptrace is not permitted: run as the same user with kernel.yama.ptrace_scope=0, "
            "or give the launcher CAP_SYS_PTRACE (docker run --cap-add SYS_PTRACE)\n";
  }
  result.ok = output.find("\n#0 ") != std::string::npos || output.rfind("#0 ", 0) == 0;
  result.text = text.str();
  return result;
}

std::vector<StackResult> CaptureStacksInto(const std::vector<StackTarget>& targets,
                                           std::chrono::milliseconds timeout,
                                           const std::string& tool) {
  std::vector<std::future<StackCapture>> captures;
  for (const StackTarget& t : targets) {
    captures.push_back(std::async(std::launch::async,
                                  [&, pid = t.pid] { return CaptureStacks(pid, timeout, tool); }));
  }
  std::vector<StackResult> results;
  for (size_t i = 0; i < targets.size(); ++i) {
    StackCapture capture = captures[i].get();
    StackResult r;
    r.rank = targets[i].rank;
    r.process_state = capture.process_state;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(targets[i].path).parent_path(), ec);
    try {
      rundir::WriteStacks(targets[i].path, capture.text);
    } catch (const std::exception& e) {
      r.problem = e.what();
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace dlaunch::launcher
