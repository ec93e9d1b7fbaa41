// Starting and signalling rank processes. The Supervisor talks to this interface only.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "core/base/unique_fd.h"

namespace dlaunch::launcher {

struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0] is an absolute or relative path, not looked up
  std::vector<std::string> env;   // the whole environment, KEY=VAL
  std::vector<int> cpus;          // CPU affinity (launcher/supervision/placement.h); empty: inherit
  // Signals the program starts with ignored (SIG_IGN survives exec): the built-in ranks take
  // SIGUSR1 and SIGUSR2 this way until their own handlers are in place.
  std::vector<int> ignored_signals;
  // When >= 0, an open cgroup.procs: the child joins that cgroup (writes "0") before exec.
  int cgroup_procs_fd = -1;
  // A pipe for the Python rank agent, which needs no disk: its write end is inherited by the
  // program, named by DLAUNCH_AGENT_FD (added to env); the agent sends its heartbeats through it
  // when it cannot write heartbeat.json.
  bool agent_pipe = false;
};

struct SpawnedProcess {
  pid_t pid = -1;
  base::UniqueFd pidfd;      // readable once the process exited
  base::UniqueFd stdout_fd;  // read ends of the rank's stdout and stderr pipes, non-blocking
  base::UniqueFd stderr_fd;
  base::UniqueFd agent_fd;  // read end of the agent's pipe (ProcessSpec::agent_pipe), non-blocking
};

class ProcessSpawner {
 public:
  virtual ~ProcessSpawner() = default;
  // Blocks until the program was exec'd (or failed to be). Throws Error naming the program.
  virtual SpawnedProcess Spawn(const ProcessSpec& spec) = 0;
  // Sends `sig` to the process group the process leads. Does not block.
  virtual void SignalGroup(pid_t pid, int sig) = 0;
  // Collects the exit status of an exited process (waitpid status). Does not block once the
  // pidfd is readable.
  virtual int Reap(pid_t pid) = 0;
};

// fork/exec with each rank in its own process group, PR_SET_PDEATHSIG(SIGKILL) so ranks die with
// the launcher, the signal mask and dispositions reset, stdin from /dev/null, and a pidfd so
// exits arrive as events. Must be called from the thread that lives as long as the ranks:
// the kernel ties PR_SET_PDEATHSIG to the forking thread.
std::unique_ptr<ProcessSpawner> MakeForkExecSpawner();

}  // namespace dlaunch::launcher
