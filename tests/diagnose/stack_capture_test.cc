// Stack capture with the real gdb against a real forked, SIGSTOPped child.
#include "launcher/diagnose/stack_capture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "launcher/diagnose/stack_parser.h"

namespace dlaunch::launcher {
namespace {

using ::testing::HasSubstr;

class StoppedChild : public ::testing::Test {
 protected:
  void SetUp() override {
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      for (;;) ::pause();
    }
    // Stop it only once it sleeps in pause(): stopped earlier, its stack is still fork's. No event
    // says a process went to sleep; its state in /proc does, within a few scheduler slices.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (ProcessState(pid_).rfind("S", 0) != 0 && std::chrono::steady_clock::now() < deadline) {
      ::sched_yield();
    }
    ASSERT_EQ(::kill(pid_, SIGSTOP), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid_, &status, WUNTRACED), pid_);  // the stop has happened
    ASSERT_TRUE(WIFSTOPPED(status));
  }
  void TearDown() override {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_t pid_ = -1;
};

TEST_F(StoppedChild, GdbCapturesAllThreadsAndLeavesItStopped) {
  if (::access("/usr/bin/gdb", X_OK) != 0) GTEST_SKIP() << "gdb is not installed";
  StackCapture capture = CaptureStacks(pid_, std::chrono::seconds(30), "/usr/bin/gdb");
  if (capture.text.find("ptrace: Operation not permitted") != std::string::npos) {
    GTEST_SKIP() << "ptrace is not permitted here";
  }
  EXPECT_TRUE(capture.ok) << capture.text;
  EXPECT_EQ(capture.process_state, "T (stopped)");
  EXPECT_THAT(capture.text, HasSubstr("Thread 1 "));
  EXPECT_THAT(capture.text, HasSubstr("#0 "));
  EXPECT_THAT(capture.text, HasSubstr(" in main ()"));
  EXPECT_EQ(ProcessState(pid_), "T (stopped)");
}

// eu-stack: the fast tool, a stopped process left stopped, its main thread read by the parser.
TEST_F(StoppedChild, EuStackCapturesTheMainThreadAndLeavesItStopped) {
  if (::access("/usr/bin/eu-stack", X_OK) != 0) GTEST_SKIP() << "elfutils is not installed";
  StackCapture capture = CaptureStacks(pid_, std::chrono::seconds(30), "/usr/bin/eu-stack");
  if (capture.text.find("Operation not permitted") != std::string::npos) {
    GTEST_SKIP() << "ptrace is not permitted here";
  }
  EXPECT_TRUE(capture.ok) << capture.text;
  EXPECT_EQ(capture.process_state, "T (stopped)");
  EXPECT_THAT(capture.text, HasSubstr("TID " + std::to_string(pid_) + ":"));
  EXPECT_EQ(ProcessState(pid_), "T (stopped)");
  const StackSummary summary = ParseGdbStacks(capture.text);
  EXPECT_THAT(summary.top, HasSubstr("pause")) << capture.text;
  EXPECT_EQ(summary.activity, StackActivity::kWait) << capture.text;
  EXPECT_EQ(DefaultStackTool(), "eu-stack");
}

TEST(StackParserTest, EuStackMainThreadIsTheProcessOwnTid) {
  const std::string text =
      "# native stacks of pid 42 (process state S (sleeping)) via eu-stack -p 42\n"
      "PID 42 - process\n"
      "TID 43:\n"
      "#0  0x00007f5598e5ac82 __sigtimedwait\n"
      "TID 42:\n"
      "#0  0x00007f5598f1f829 syscall\n"
      "#1  0x00007f55acb8c1fc\n"
      "#2  0x000055a314fae7c2 gloo::transport::tcp::UnboundBuffer::waitRecv\n"
      "#3  0x000055a314f72e0b main\n"
      "TID 44:\n"
      "#0  0x00007f5598e5ac82 poll\n";
  const StackSummary summary = ParseGdbStacks(text);
  EXPECT_EQ(summary.top, "syscall < ?? < gloo::transport::tcp::UnboundBuffer::waitRecv < main");
  EXPECT_EQ(summary.activity, StackActivity::kCollective);
}

TEST_F(StoppedChild, MissingGdbIsSaidInTheText) {
  StackCapture capture = CaptureStacks(pid_, std::chrono::seconds(5), "/nonexistent/gdb");
  EXPECT_FALSE(capture.ok);
  EXPECT_THAT(capture.text, HasSubstr("gdb not found"));
}

TEST_F(StoppedChild, SlowGdbIsKilledAtTheTimeout) {
  // A script stands in for a gdb that never finishes.
  char path[] = "/tmp/dlaunch-fake-gdb-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string script = "#!/bin/sh\nexec sleep 60\n";
  ASSERT_EQ(::write(fd, script.data(), script.size()), static_cast<ssize_t>(script.size()));
  ::close(fd);
  ::chmod(path, 0755);
  const auto start = std::chrono::steady_clock::now();
  StackCapture capture = CaptureStacks(pid_, std::chrono::milliseconds(300), path);
  ::unlink(path);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(capture.ok);
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_THAT(capture.text, HasSubstr("did not finish within 300 ms"));
}

TEST(StackCaptureTest, GoneProcessIsReported) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  StackCapture capture = CaptureStacks(pid, std::chrono::seconds(5), "/usr/bin/gdb");
  EXPECT_FALSE(capture.ok);
  EXPECT_THAT(capture.text, HasSubstr("no longer exists"));
  EXPECT_EQ(ProcessState(pid), "");
}

}  // namespace
}  // namespace dlaunch::launcher
