#include "launcher/supervision/process_spawner.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace dlaunch::launcher {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  throw Error(ErrorKind::kInternal, what + ": " + std::strerror(errno));
}

class ForkExecSpawner : public ProcessSpawner {
 public:
  SpawnedProcess Spawn(const ProcessSpec& spec) override {
    base::UniqueFd out[2], err[2], status[2], agent[2];
    for (base::UniqueFd* pipe : {out, err, status, agent}) {
      if (pipe == agent && !spec.agent_pipe) continue;
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) Fail("pipe");
      pipe[0].reset(fds[0]);
      pipe[1].reset(fds[1]);
    }
    // The child keeps the agent's write end at the number it has here.
    const std::string agent_var =
        spec.agent_pipe ? "DLAUNCH_AGENT_FD=" + std::to_string(agent[1].get()) : "";
    std::vector<char*> argv, envp;
    for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : spec.env) {
      // A pipe of a launcher above this one (dlaunch inside a dlaunch rank) is not this rank's.
      if (e.rfind("DLAUNCH_AGENT_FD=", 0) != 0) envp.push_back(const_cast<char*>(e.c_str()));
    }
    if (spec.agent_pipe) envp.push_back(const_cast<char*>(agent_var.c_str()));
    envp.push_back(nullptr);
    cpu_set_t cpus;  // built before fork: the child may only make async-signal-safe calls
    CPU_ZERO(&cpus);
    for (int c : spec.cpus) CPU_SET(c, &cpus);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) Fail("fork");
    if (pid == 0) {
      // Only async-signal-safe calls from here to execve: the launcher has other threads.
      ::setpgid(0, 0);
      if (spec.cgroup_procs_fd >= 0) (void)!::write(spec.cgroup_procs_fd, "0", 1);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took hold
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGCHLD}) {
        ::signal(sig, SIG_DFL);
      }
      for (int sig : spec.ignored_signals) ::signal(sig, SIG_IGN);
      int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, 0);
      ::dup2(out[1].get(), 1);
      ::dup2(err[1].get(), 2);
      if (agent[1]) ::fcntl(agent[1].get(), F_SETFD, 0);  // survives the exec
      if (!spec.cpus.empty()) ::sched_setaffinity(0, sizeof(cpus), &cpus);
      ::execve(argv[0], argv.data(), envp.data());
      int e = errno;
      (void)!::write(status[1].get(), &e, sizeof(e));
      ::_exit(127);
    }
    // Also from the parent, so the group exists before anyone signals it.
    ::setpgid(pid, pid);
    out[1].reset();
    err[1].reset();
    status[1].reset();
    agent[1].reset();
    int exec_errno = 0;
    ssize_t n;
    do {
      n = ::read(status[0].get(), &exec_errno, sizeof(exec_errno));
    } while (n < 0 && errno == EINTR);
    if (n == sizeof(exec_errno)) {
      ::waitpid(pid, nullptr, 0);
      throw Error(ErrorKind::kInvalidArgument,
                  "cannot run " + spec.argv[0] + ": " + std::strerror(exec_errno));
    }
    SpawnedProcess p;
    p.pid = pid;
    p.pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!p.pidfd) Fail("pidfd_open");
    p.stdout_fd = std::move(out[0]);
    p.stderr_fd = std::move(err[0]);
    ::fcntl(p.stdout_fd.get(), F_SETFL, O_NONBLOCK);
    ::fcntl(p.stderr_fd.get(), F_SETFL, O_NONBLOCK);
    if (agent[0]) {
      p.agent_fd = std::move(agent[0]);
      ::fcntl(p.agent_fd.get(), F_SETFL, O_NONBLOCK);
    }
    return p;
  }

  void SignalGroup(pid_t pid, int sig) override {
    if (::kill(-pid, sig) != 0 && errno == ESRCH) ::kill(pid, sig);
  }

  int Reap(pid_t pid) override {
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid, &status, 0);
    } while (r < 0 && errno == EINTR);
    return status;
  }
};

}  // namespace

std::unique_ptr<ProcessSpawner> MakeForkExecSpawner() {
  return std::make_unique<ForkExecSpawner>();
}

}  // namespace dlaunch::launcher
