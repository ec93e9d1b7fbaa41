// What a rank starts dies with it, also when dlaunch itself is SIGKILLed: PR_SET_PDEATHSIG ends
// the ranks, but not their children (`bash -c 'sleep 300 & exec prog'`).
//
// Two ways, the better one where Linux offers it:
//  - cgroup v2 (writable, with cgroup.kill, Linux 5.14+): each rank runs in its own cgroup
//    <dlaunch's cgroup>/dlaunch-<pid>/rank<R>, which holds every process it starts, even one that
//    calls setsid() or double-forks; `cgroup.kill` ends them all.
//  - otherwise each rank's process group (where a shell's background jobs stay).
// A janitor process, forked at the start, holds the other end of a pipe from dlaunch: when dlaunch
// dies in any way the pipe reads end-of-file, and the janitor kills every rank's cgroup and process
// group, removes the cgroups and the ranks' leftover shared-memory segments, and exits. It keeps no
// other descriptor of dlaunch's (the coordinator's listening socket, say). DLAUNCH_CGROUPS=off
// chooses the process groups.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "core/base/unique_fd.h"

namespace dlaunch::launcher {

class RankJanitor {
 public:
  // Forks the janitor; creates the job's cgroup where it can. Never throws: without a janitor
  // (fork failed) ranks are still ended by PR_SET_PDEATHSIG and their group at exit.
  RankJanitor();
  // Kills what is left in every rank cgroup, removes the cgroups (waiting at most about a
  // second for them to empty) and lets the janitor go: waits at most 3 s for it to exit, then
  // kills it (a stopped janitor never holds dlaunch).
  ~RankJanitor();
  RankJanitor(const RankJanitor&) = delete;
  RankJanitor& operator=(const RankJanitor&) = delete;

  bool uses_cgroups() const { return !job_cgroup_.empty(); }
  // The janitor's pid, -1 without one.
  pid_t janitor_pid() const { return janitor_; }
  // The cgroup v2 folder of the job, "" with process groups only.
  const std::string& job_cgroup() const { return job_cgroup_; }

  // Before spawning `rank`: an open cgroup.procs of its cgroup, for the child to write "0" to
  // between fork and exec; an empty base::UniqueFd without cgroups.
  base::UniqueFd PrepareRank(int rank);
  // The rank started as the leader of process group `pgid`.
  void RankStarted(pid_t pgid);
  // `rank` (leader of group `pgid`) exited: kills what it left in its cgroup and removes the
  // shared-memory segments it left (RemoveShmSegmentsOf). Does not block.
  void RankExited(int rank, pid_t pgid);

 private:
  void Tell(int32_t word);
  std::string RankCgroup(int index) const;

  std::string job_cgroup_;
  base::UniqueFd to_janitor_;
  pid_t janitor_ = -1;
  std::vector<int> rank_cgroups_;  // ranks whose cgroup exists
};

// Removes <shm_dir>/dlaunch-<pid>-*: the shared-memory segments (core/comm/shm_group.cc names
// them after their creator's pid) that the process `pid` created and never unlinked, as when it
// was killed during their set-up. Returns how many. Does not block.
int RemoveShmSegmentsOf(pid_t pid, const std::string& shm_dir = "/dev/shm");

// The cgroup v2 folder this process is in ("/sys/fs/cgroup/unified/user.slice/..."), when cgroup
// v2 is mounted; "".
std::string OwnCgroupV2();

}  // namespace dlaunch::launcher
