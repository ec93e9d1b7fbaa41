// The FileTimer server over its real FIFO with real forked processes standing for ranks: an
// expired scope kills its rank, a release keeps it alive, and hostile lines kill nothing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "launcher/supervision/file_timer.h"
#include "tests/common/paused_child.h"

namespace dlaunch::launcher {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

using Child = ::dlaunch::testing::PausedChild;

void Send(const std::string& fifo, const std::string& text) {
  const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(fd, 0) << fifo;
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
}

std::string Request(pid_t pid, const std::string& scope, double at, int sig) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "{\"version\": 1, \"pid\": %d, \"scope_id\": \"%s\", \"expiration_time\": %.3f, "
                "\"signal\": %d}\n",
                pid, scope.c_str(), at, sig);
  return buf;
}

// The server's console lines go to a pipe nobody reads beyond its buffer: /dev/null.
int Quiet() {
  static const int fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  return fd;
}

TEST(FileTimerServerTest, ExpiredScopeKillsItsRankWithItsSignal) {
  Child rank;
  FileTimerServer server([&] { return std::map<pid_t, int>{{rank.pid(), 1}}; }, Quiet());
  const auto start = std::chrono::steady_clock::now();
  Send(server.path(), Request(rank.pid(), "step", Now() + 0.3, SIGTERM));
  EXPECT_EQ(rank.WaitKilled(5000), SIGTERM);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 2.0);
  const auto kills = server.TakeKills();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].rank, 1);
  EXPECT_EQ(kills[0].scope, "step");
  EXPECT_EQ(kills[0].signal, SIGTERM);
}

TEST(FileTimerServerTest, ReleasedScopeDoesNotKill) {
  Child rank;
  FileTimerServer server([&] { return std::map<pid_t, int>{{rank.pid(), 0}}; }, Quiet());
  Send(server.path(), Request(rank.pid(), "first", Now() + 0.2, SIGKILL) +
                          Request(rank.pid(), "first", -1, 0) +
                          Request(rank.pid(), "second", Now() + 0.6, SIGKILL));
  EXPECT_EQ(rank.WaitKilled(5000), SIGKILL);
  const auto kills = server.TakeKills();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].scope, "second");  // "first" was released before it expired
}

TEST(FileTimerServerTest, HostileLinesAndForeignPidsKillNothing) {
  Child rank, foreign;
  FileTimerServer server([&] { return std::map<pid_t, int>{{rank.pid(), 0}}; }, Quiet());
  const double past = Now() - 10;
  Send(server.path(), "garbage\n{\"pid\": 1}\n" + Request(foreign.pid(), "x", past, SIGKILL) +
                          Request(0, "x", past, SIGKILL) + Request(-1, "x", past, SIGKILL) +
                          Request(::getpid(), "x", past, SIGKILL) + std::string(9000, 'z') + "\n");
  // A request of the rank's own, sent last: once it killed the rank, the server had read all.
  Send(server.path(), Request(rank.pid(), "sentinel", past, SIGKILL));
  ASSERT_EQ(rank.WaitKilled(5000), SIGKILL);
  EXPECT_TRUE(foreign.Alive());
  EXPECT_EQ(server.refused(), 7);  // garbage, {"pid": 1}, foreign, 0, -1, this process, long line
  const auto kills = server.TakeKills();
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].scope, "sentinel");
}

TEST(FileTimerServerTest, FifoIsPrivateAndRemovedAtTheEnd) {
  std::string path;
  {
    FileTimerServer server([] { return std::map<pid_t, int>{}; }, Quiet());
    path = server.path();
    struct stat dir {};
    ASSERT_EQ(::stat(std::filesystem::path(path).parent_path().c_str(), &dir), 0);
    EXPECT_EQ(dir.st_mode & 0777, 0700u);
    struct stat fifo {};
    ASSERT_EQ(::stat(path.c_str(), &fifo), 0);
    EXPECT_TRUE(S_ISFIFO(fifo.st_mode));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(path).parent_path()));
}

TEST(FileTimerServerTest, UnusableTmpdirIsAUsageError) {
  const char* was = std::getenv("TMPDIR");
  const std::string saved = was ? was : "";
  ::setenv("TMPDIR", "/nonexistent-dlaunch-tmp", 1);
  try {
    FileTimerServer server([] { return std::map<pid_t, int>{}; }, Quiet());
    ADD_FAILURE() << "made " << server.path();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("in /nonexistent-dlaunch-tmp (TMPDIR)"), std::string::npos)
        << e.what();
  }
  if (was) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
}

}  // namespace
}  // namespace dlaunch::launcher
