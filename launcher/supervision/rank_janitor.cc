#include "launcher/supervision/rank_janitor.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace dlaunch::launcher {
namespace {

constexpr size_t kMaxGroups = 1 << 16;
constexpr int kEmptyTries = 100;  // x 10 ms: how long a cgroup may take to empty after a kill
// How long dlaunch waits for its janitor to go after its own cleanup: the janitor's takes at most
// kEmptyTries naps.
constexpr int kJanitorExitMs = 3000;

bool WriteSmall(const std::string& path, const char* text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text, std::strlen(text)) == static_cast<ssize_t>(std::strlen(text));
  ::close(fd);
  return ok;
}

void Nap10ms() {
  timespec ts{0, 10 * 1000 * 1000};
  ::nanosleep(&ts, nullptr);
}

// Removes the empty child cgroups of `dir_fd`; true when none is left. Raw system calls only: the
// janitor runs it in a child forked from a threaded process.
bool RemoveChildCgroups(int dir_fd) {
  char buf[4096];
  bool left = false;
  ::lseek(dir_fd, 0, SEEK_SET);
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir_fd, buf, sizeof(buf));
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + off);
      off += d->d_reclen;
      if (d->d_type != DT_DIR || std::strcmp(d->d_name, ".") == 0 ||
          std::strcmp(d->d_name, "..") == 0) {
        continue;
      }
      if (::unlinkat(dir_fd, d->d_name, AT_REMOVEDIR) != 0) left = true;
    }
  }
  return !left;
}

// Closes every descriptor from 3 up but the `n` in `keep`: the janitor inherits whatever dlaunch
// had open, the coordinator's listening socket among them, and would keep it (the port taken,
// connections accepted into a backlog nobody reads) long after dlaunch. Raw system calls only.
void CloseAllBut(const int* keep, int n) {
  int sorted[8];
  int count = 0;
  for (int i = 0; i < n && count < 8; ++i) {
    if (keep[i] < 3) continue;
    int j = count++;
    for (; j > 0 && sorted[j - 1] > keep[i]; --j) sorted[j] = sorted[j - 1];
    sorted[j] = keep[i];
  }
  rlimit lim{};
  const unsigned max_fd = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY
                              ? static_cast<unsigned>(std::min<rlim_t>(lim.rlim_cur, 1 << 20))
                              : 1u << 16;
  auto close_range = [&](unsigned from, unsigned to) {  // [from, to]
    if (from > to) return;
#ifdef SYS_close_range
    if (::syscall(SYS_close_range, from, to, 0) == 0) return;
#endif
    for (unsigned fd = from; fd <= to && fd < max_fd; ++fd) ::close(static_cast<int>(fd));
  };
  unsigned from = 3;
  for (int i = 0; i < count; ++i) {
    close_range(from, static_cast<unsigned>(sorted[i]) - 1);
    from = static_cast<unsigned>(sorted[i]) + 1;
  }
  close_range(from, ~0u);
}

// Whether `pid`, a child, ended within `timeout_ms` (reaped then). A pidfd tells when; without
// one (Linux < 5.3) it is polled every 10 ms.
bool Reaped(pid_t pid, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
#ifdef SYS_pidfd_open
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  const int pidfd = -1;
#endif
  bool reaped = false;
  for (;;) {
    const pid_t r = ::waitpid(pid, nullptr, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) {
      reaped = true;
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) break;
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 10000)));
    } else {
      Nap10ms();
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  return reaped;
}

// Unlinks the entries "dlaunch-<pid>-*" of the folder `shm_fd` (/dev/shm) whose pid is one of
// `groups`: the shared-memory segments of ranks that were killed while setting them up. Raw
// system calls only, no allocation (it runs in the janitor).
void RemoveSegmentsOfGroups(int shm_fd, const pid_t* groups) {
  static const char kPrefix[] = "dlaunch-";
  char buf[4096];
  ::lseek(shm_fd, 0, SEEK_SET);
  for (;;) {
    const long n = ::syscall(SYS_getdents64, shm_fd, buf, sizeof(buf));
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + off);
      off += d->d_reclen;
      if (std::strncmp(d->d_name, kPrefix, sizeof(kPrefix) - 1) != 0) continue;
      const char* p = d->d_name + sizeof(kPrefix) - 1;
      long pid = 0;
      for (; *p >= '0' && *p <= '9' && pid < (1L << 31); ++p) pid = pid * 10 + (*p - '0');
      if (*p != '-' || pid <= 0) continue;
      for (size_t i = 0; i < kMaxGroups; ++i) {
        if (groups[i] == pid) {
          ::unlinkat(shm_fd, d->d_name, 0);
          break;
        }
      }
    }
  }
}

// The janitor: waits for dlaunch to go (end-of-file on the pipe), then kills every rank's cgroup
// and process group and removes the cgroups. Only async-signal-safe calls, and no allocation.
[[noreturn]] void JanitorMain(int from_launcher, int kill_fd, int dir_fd, int parent_fd, int shm_fd,
                              const char* name, pid_t* groups) {
  ::setsid();  // out of dlaunch's process group and terminal: a group kill or Ctrl-C spares it
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE}) {
    ::sigaction(sig, &ignore, nullptr);
  }
  const int devnull = ::open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    for (int fd = 0; fd < 3; ++fd) ::dup2(devnull, fd);
  }
  const int keep[] = {from_launcher, kill_fd, dir_fd, parent_fd, shm_fd};
  CloseAllBut(keep, 5);
  for (;;) {
    int32_t word = 0;
    const ssize_t n = ::read(from_launcher, &word, sizeof(word));
    if (n < 0 && errno == EINTR) continue;
    if (n != sizeof(word)) break;  // end-of-file: dlaunch is gone
    const pid_t g = word > 0 ? word : -word;
    for (size_t i = 0; i < kMaxGroups; ++i) {
      if (word > 0 && groups[i] == 0) {
        groups[i] = g;
        break;
      }
      if (word < 0 && groups[i] == g) {
        groups[i] = 0;
        break;
      }
    }
  }
  if (kill_fd >= 0) (void)!::write(kill_fd, "1", 1);
  for (size_t i = 0; i < kMaxGroups; ++i) {
    if (groups[i] > 0) ::kill(-groups[i], SIGKILL);
  }
  if (shm_fd >= 0) RemoveSegmentsOfGroups(shm_fd, groups);
  if (dir_fd >= 0) {
    for (int i = 0; i < kEmptyTries && !RemoveChildCgroups(dir_fd); ++i) Nap10ms();
    ::unlinkat(parent_fd, name, AT_REMOVEDIR);
  }
  ::_exit(0);
}

// The cgroup2 mount point from /proc/self/mountinfo; "" when there is none.
std::string CgroupV2Mount() {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    // ... mount-point ... - fstype source options
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string id, parent, devno, root, mount_point;
    if (fields >> id >> parent >> devno >> root >> mount_point) return mount_point;
  }
  return "";
}

}  // namespace

std::string OwnCgroupV2() {
  const std::string mount = CgroupV2Mount();
  if (mount.empty()) return "";
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string path = line.substr(3);
    return path == "/" ? mount : mount + path;
  }
  return "";
}

RankJanitor::RankJanitor() {
  const char* mode = std::getenv("DLAUNCH_CGROUPS");
  const std::string own = mode && std::string(mode) == "off" ? "" : OwnCgroupV2();
  std::string name;
  if (!own.empty()) {
    // A folder of its own, never another launcher's (one in another pid namespace may share the
    // pid): its rank cgroups would be killed with ours.
    std::string dir;
    for (int n = 0; n < 10 && dir.empty(); ++n) {
      name = "dlaunch-" + std::to_string(::getpid()) + (n ? "-" + std::to_string(n) : "");
      if (::mkdir((own + "/" + name).c_str(), 0755) == 0) dir = own + "/" + name;
      if (dir.empty() && errno != EEXIST) break;
    }
    if (!dir.empty()) {
      // cgroup.kill came with Linux 5.14; without it a cgroup cannot end its processes at once.
      if (::access((dir + "/cgroup.kill").c_str(), W_OK) == 0) {
        job_cgroup_ = dir;
      } else {
        ::rmdir(dir.c_str());
      }
    }
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  base::UniqueFd read_end(fds[0]);
  to_janitor_.reset(fds[1]);
  // Prepared before the fork: the child may not allocate.
  std::vector<pid_t> groups(kMaxGroups, 0);
  base::UniqueFd kill_fd, dir_fd, parent_fd;
  base::UniqueFd shm_fd(::open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (uses_cgroups()) {
    kill_fd.reset(::open((job_cgroup_ + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC));
    dir_fd.reset(::open(job_cgroup_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    parent_fd.reset(::open(own.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  janitor_ = ::fork();
  if (janitor_ == 0) {
    to_janitor_.reset();  // its own copy of the write end would keep the pipe from ending
    JanitorMain(read_end.get(), kill_fd.get(), dir_fd.get(), parent_fd.get(), shm_fd.get(),
                name.c_str(), groups.data());
  }
  if (janitor_ < 0) to_janitor_.reset();
}

RankJanitor::~RankJanitor() {
  for (int rank : rank_cgroups_) {
    const std::string dir = RankCgroup(rank);
    WriteSmall(dir + "/cgroup.kill", "1");
    for (int i = 0; i < kEmptyTries && ::rmdir(dir.c_str()) != 0 && errno == EBUSY; ++i) {
      Nap10ms();
    }
  }
  if (uses_cgroups()) ::rmdir(job_cgroup_.c_str());
  to_janitor_.reset();
  if (janitor_ > 0) {
    // A stopped janitor (SIGSTOP, a debugger) must not hold dlaunch here forever: it is woken,
    // given the time its cleanup takes, then ended (the rank cgroups were killed above already).
    ::kill(janitor_, SIGCONT);
    if (!Reaped(janitor_, kJanitorExitMs)) {
      ::kill(janitor_, SIGKILL);
      while (::waitpid(janitor_, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }
}

std::string RankJanitor::RankCgroup(int rank) const {
  return job_cgroup_ + "/rank" + std::to_string(rank);
}

base::UniqueFd RankJanitor::PrepareRank(int rank) {
  if (!uses_cgroups()) return base::UniqueFd();
  const std::string dir = RankCgroup(rank);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return base::UniqueFd();
  if (std::find(rank_cgroups_.begin(), rank_cgroups_.end(), rank) == rank_cgroups_.end()) {
    rank_cgroups_.push_back(rank);
  }
  return base::UniqueFd(::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
}

void RankJanitor::Tell(int32_t word) {
  if (!to_janitor_) return;
  while (::write(to_janitor_.get(), &word, sizeof(word)) < 0 && errno == EINTR) {
  }
}

void RankJanitor::RankStarted(pid_t pgid) { Tell(pgid); }

void RankJanitor::RankExited(int rank, pid_t pgid) {
  if (uses_cgroups()) WriteSmall(RankCgroup(rank) + "/cgroup.kill", "1");
  Tell(-pgid);
  RemoveShmSegmentsOf(pgid);
}

int RemoveShmSegmentsOf(pid_t pid, const std::string& shm_dir) {
  const std::string prefix = "dlaunch-" + std::to_string(pid) + "-";
  int removed = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(shm_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    std::error_code rm_ec;
    if (std::filesystem::remove(e.path(), rm_ec)) ++removed;
  }
  return removed;
}

}  // namespace dlaunch::launcher
