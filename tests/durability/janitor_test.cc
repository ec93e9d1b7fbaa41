// #30's janitor findings: a SIGSTOPped janitor hung the launcher forever in waitpid (even after
// SIGTERM), and the janitor held the coordinator's listening socket.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "core/comm/shm_group.h"
#include "core/store.h"
#include "launcher/supervision/rank_janitor.h"

namespace dlaunch::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The process state letter of /proc/<pid>/stat ('T' stopped, 'Z' zombie), '?' when gone.
char State(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return '?';
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : '?';
}

// Whether `pid` has a descriptor open on the socket with inode `inode`.
bool HoldsSocket(pid_t pid, ino_t inode) {
  const std::string want = "socket:[" + std::to_string(inode) + "]";
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::error_code link_ec;
    if (std::filesystem::read_symlink(e.path(), link_ec).string() == want) return true;
  }
  return false;
}

// /proc has no event for a change of state or of descriptors: polled, within `timeout`.
bool Eventually(const std::function<bool()>& pred, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

TEST(RankJanitorTest, KeepsNoneOfTheLaunchersSocketsAndAStoppedOneDoesNotHoldItsExit) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);  // as the coordinator's, no CLOEXEC
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(listener, &st), 0);

  auto janitor = std::make_unique<RankJanitor>();
  const pid_t pid = janitor->janitor_pid();
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(Eventually([&] { return !HoldsSocket(pid, st.st_ino); }, seconds(5)))
      << "the janitor holds the listening socket";

  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  ASSERT_TRUE(Eventually([&] { return State(pid) == 'T'; }, seconds(5)));
  const auto t0 = std::chrono::steady_clock::now();
  auto gone = std::async(std::launch::async, [&] { janitor.reset(); });
  const bool ended = gone.wait_for(seconds(20)) == std::future_status::ready;
  if (!ended) ::kill(pid, SIGKILL);  // so that the test itself ends
  gone.get();
  EXPECT_TRUE(ended) << "the launcher waited for its stopped janitor";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(10));
  EXPECT_EQ(State(pid), '?');  // reaped
  ::close(listener);
}

// The segments under /dev/shm named after `pid`.
std::vector<std::string> SegmentsOf(pid_t pid) {
  std::vector<std::string> names;
  const std::string prefix = "dlaunch-" + std::to_string(pid) + "-";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  return names;
}

// A forked rank: local rank 0 of a two-rank group creates the segment and waits (60 s) for
// rank 1, which never maps it. It leads its own process group and, as exec would, keeps none of
// its parent's descriptors (a launcher's pipe to its janitor among them).
[[noreturn]] void RankInSetUp() {
  ::setpgid(0, 0);
  for (int fd = 3; fd < 1024; ++fd) ::close(fd);
  core::ShmGroupOptions o;
  o.local_rank = 0;
  o.world_ranks = {0, 1};
  o.store = core::MakeMemoryStore();
  o.rendezvous_timeout = std::chrono::seconds(60);
  try {
    core::ShmGroup group(o);
  } catch (...) {
  }
  ::_exit(0);
}

// #30: a rank killed during shared-memory set-up leaked its /dev/shm/dlaunch-* segment (14.7 MB,
// 10 of 10 times). Local rank 0 of a two-rank group creates the segment and waits for rank 1,
// which never maps it; it is SIGKILLed there, as the campaign did.
TEST(RankJanitorTest, ARankKilledDuringSharedMemorySetUpLeavesNoSegment) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  RankJanitor janitor;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) RankInSetUp();
  ::setpgid(child, child);
  janitor.RankStarted(child);
  EXPECT_TRUE(Eventually([&] { return !SegmentsOf(child).empty(); }, seconds(20)))
      << "the rank never created its segment";
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_FALSE(SegmentsOf(child).empty());  // what the rank left
  janitor.RankExited(0, child);
  EXPECT_TRUE(SegmentsOf(child).empty());
}

// The same when the launcher itself is SIGKILLed during the rank's set-up: the janitor removes
// the segment with the rank.
TEST(RankJanitorTest, ALauncherKilledDuringSharedMemorySetUpLeavesNoSegment) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t launcher = ::fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {  // a launcher with a janitor and one rank
    ::close(fds[0]);
    RankJanitor janitor;
    const pid_t rank = ::fork();
    if (rank == 0) RankInSetUp();
    ::setpgid(rank, rank);
    janitor.RankStarted(rank);
    (void)!::write(fds[1], &rank, sizeof(rank));
    for (;;) ::pause();
  }
  ::close(fds[1]);
  pid_t rank = 0;
  ASSERT_EQ(::read(fds[0], &rank, sizeof(rank)), static_cast<ssize_t>(sizeof(rank)));
  ::close(fds[0]);
  const bool created = Eventually([&] { return !SegmentsOf(rank).empty(); }, seconds(20));
  ::kill(launcher, SIGKILL);
  ASSERT_EQ(::waitpid(launcher, nullptr, 0), launcher);
  ASSERT_TRUE(created) << "the rank never created its segment";
  EXPECT_TRUE(Eventually([&] { return SegmentsOf(rank).empty(); }, seconds(10)))
      << "the janitor left /dev/shm/" << SegmentsOf(rank).front();
  EXPECT_TRUE(Eventually([&] { return State(rank) == '?' || State(rank) == 'Z'; }, seconds(10)));
  if (State(rank) != '?' && State(rank) != 'Z') ::kill(rank, SIGKILL);
}

}  // namespace
}  // namespace dlaunch::launcher
