// A full log disk never turns a good job into a failed one: the logs cut short are named once,
// summary.json is still written (in the room kept for it, or in a second place that is named).
// A disk that fails the ranks' files (full, or an immutable rank folder) hides no hang of a
// Python rank and loses no root cause. Uses a tiny tmpfs as the log disk, so it needs root
// (CAP_SYS_ADMIN); skipped otherwise.
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/base/unique_fd.h"
#include "durability_harness.h"
#include "tests/common/tiny_disk.h"

namespace dlaunch::testing {
namespace {

using std::chrono::seconds;
using std::chrono::steady_clock;

class FullDiskTest : public DurabilityTest {
 protected:
  void SetUp() override {
    DurabilityTest::SetUp();
    if (const std::string why = disk_.Mount(log_dir_, MountSize()); !why.empty()) {
      GTEST_SKIP() << why;
    }
  }
  virtual std::string MountSize() const { return "2m"; }

  // Fills the log disk up to `leave` bytes of room (0: to the last byte) with a new file.
  void FillDisk(uint64_t leave = 0) { ASSERT_TRUE(disk_.Fill(leave)); }

  TinyDisk disk_;
};

// Two ranks print 3 MB each into a 2 MiB log disk and exit 0.
TEST_F(FullDiskTest, LogsFillTheDiskAndTheJobStillSucceeds) {
  Launched l(Cmd({"--quiet", "--nproc", "2", "--", "bash", "-c",
                  "head -c 3000000 /dev/zero | tr '\\0' x | fold -w 100; echo done"}));
  EXPECT_EQ(l.Wait(seconds(120)), 0) << l.err_text();
  const std::string err = l.err_text();
  const size_t said = err.find("logs cut short under " + RunDir().string());
  ASSERT_NE(said, std::string::npos) << err;
  EXPECT_EQ(err.find("logs cut short", said + 1), std::string::npos) << "said more than once";
  EXPECT_NE(err.find("rank0/stdout.log at "), std::string::npos) << err;
  rundir::Summary s;
  ASSERT_TRUE(ReadSummaryFile(&s)) << "the reserved room did not take the summary\n" << err;
  EXPECT_EQ(s.exit_code, 0);
  EXPECT_EQ(s.truncated_logs, (std::vector<std::string>{"rank0/stdout.log", "rank1/stdout.log"}));
  EXPECT_FALSE(fs::exists(RunDir() / ".reserve"));
}

// The disk is full before the job starts: no room can be reserved, so the summary goes to
// $TMPDIR/dlaunch-summary-<run-id>/ and dlaunch says where.
TEST_F(FullDiskTest, SummaryFallsBackToASecondPlaceWhenNoRoomIsLeft) {
  FillDisk();
  const fs::path alt = dir_ / "alt";
  Launched l(Cmd({"--quiet", "--nproc", "2", "--", "bash", "-c", "echo hello"}),
             {"TMPDIR=" + alt.string()});
  EXPECT_EQ(l.Wait(seconds(60)), 0) << l.err_text();
  const fs::path fallback = alt / "dlaunch-summary-run" / "summary.json";
  EXPECT_NE(l.err_text().find("summary written to " + fallback.string()), std::string::npos)
      << l.err_text();
  rundir::Summary s;
  ASSERT_TRUE(ReadSummaryFile(&s, fallback)) << l.err_text();
  EXPECT_EQ(s.exit_code, 0);
  EXPECT_EQ(s.ranks.size(), 2u);
}

// #30: the root cause's last stderr lines are the launcher's own copy: a log that could not take
// a byte of them does not lose them.
TEST_F(FullDiskTest, RootCauseKeepsItsStderrLinesWhenTheLogCannotBeWritten) {
  FillDisk();
  Launched l(Cmd({"--quiet", "--nproc", "1", "--", "bash", "-c",
                  "echo the first words >&2; echo the last words >&2; exit 7"}),
             {"TMPDIR=" + (dir_ / "alt").string()});
  EXPECT_EQ(l.Wait(seconds(60)), 1) << l.err_text();
  const std::string err = l.err_text();
  const std::string block = "  last stderr lines:\n    the first words\n    the last words\n";
  EXPECT_NE(err.find(block), std::string::npos) << err;
  EXPECT_NE(err.find("rank0/stderr.log at 0 bytes"), std::string::npos) << err;
}

// #30: no room for the reserve, a first summary.json written while the rank ran, then the disk
// full: the last summary goes to $TMPDIR, and the failure's diagnosis reads that one, not the
// stale one that still says the job runs ("INCOMPLETE ... (launcher exit code -1)").
TEST_F(FullDiskTest, DiagnosisReadsTheSummaryWrittenElsewhere) {
  FillDisk(256 << 10);  // room for the first files, not for the 1 MiB reserve
  const fs::path alt = dir_ / "alt";
  Launched l(Cmd({"--quiet", "--nproc", "1", "--", "bash", "-c",
                  "head -c 600000 /dev/zero | tr '\\0' x | fold -w 100; echo gave up >&2; "
                  "exit 5"}),
             {"TMPDIR=" + alt.string()});
  EXPECT_EQ(l.Wait(seconds(60)), 1) << l.err_text();
  const std::string err = l.err_text();
  const fs::path fallback = alt / "dlaunch-summary-run" / "summary.json";
  ASSERT_NE(err.find("summary written to " + fallback.string()), std::string::npos) << err;
  rundir::Summary stale, real;
  ASSERT_TRUE(ReadSummaryFile(&stale)) << err;
  EXPECT_EQ(stale.exit_code, -1) << "the test did not leave a stale summary";
  ASSERT_TRUE(ReadSummaryFile(&real, fallback)) << err;
  EXPECT_EQ(real.exit_code, 1);
  EXPECT_EQ(err.find("INCOMPLETE"), std::string::npos) << err;
  EXPECT_EQ(err.find("exit code -1"), std::string::npos) << err;
  EXPECT_NE(err.find("exit code 5"), std::string::npos) << err;
}

// Real torch 1.13 ranks (disk_hang.py): rank 1 sleeps or stops while rank 0 waits in all-reduce
// #3, on a disk that cannot take the agent's heartbeat.json. The hang is found within about
// --hang-timeout, and the diagnosis says why the heartbeat file is stale.
class FullDiskPythonTest : public FullDiskTest {
 protected:
  static constexpr int kHangTimeoutS = 3;
  // Past --hang-timeout: one heartbeat wave to confirm, 2 s of waiting for dumps that cannot be
  // written, the native stacks (up to 10 s), a loaded host.
  static constexpr auto kFoundWithin = seconds(kHangTimeoutS + 25);

  void SetUp() override {
    if (::access(kPython, X_OK) != 0 ||
        std::system(
            (std::string(kPython) + " -c 'import torch.distributed' 2>/dev/null").c_str()) != 0) {
      GTEST_SKIP() << kPython << " with torch is not available";
    }
    FullDiskTest::SetUp();
  }
  void TearDown() override {
    for (const fs::path& d : immutable_) SetImmutable(d, false);
    FullDiskTest::TearDown();
  }
  std::string MountSize() const override { return "4m"; }

  // Sets or clears the folder's immutable flag (chattr +i): no file can be created in it, renamed
  // into it or removed from it, not even by root. False where the file system has no such flag.
  static bool SetImmutable(const fs::path& dir, bool on) {
    base::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    int flags = 0;
    if (!fd || ::ioctl(fd.get(), FS_IOC_GETFLAGS, &flags) != 0) return false;
    flags = on ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
    return ::ioctl(fd.get(), FS_IOC_SETFLAGS, &flags) == 0;
  }

  // Starts disk_hang.py MODE on 2 ranks; returns once both printed "ready" and wait for go_
  // (`go_at` "start": before their first collective, else after their third).
  std::unique_ptr<Launched> Start(const std::string& mode, const std::string& go_at = "") {
    auto l = std::make_unique<Launched>(
        Cmd({"--nproc", "2", "--hang-timeout", std::to_string(kHangTimeoutS), "--grace-period", "3",
             "--python", kPython, DLAUNCH_DURABILITY_SCRIPTS "/disk_hang.py", mode}),
        std::vector<std::string>{"GO_FILE=" + go_.string(), "GO_AT=" + go_at,
                                 "TMPDIR=" + (dir_ / "alt").string()});
    auto ready = [](const std::vector<std::string>& lines) {
      int n = 0;
      for (const std::string& line : lines) n += line.find("] ready ") != std::string::npos;
      return n == 2;
    };
    EXPECT_TRUE(l->WaitFor(ready, seconds(90))) << l->err_text();
    return l;
  }
  // Lets the ranks go on; returns when dlaunch exits, its exit code (-1: not within the bound).
  int GoAndWait(Launched& l, steady_clock::duration* took) {
    std::ofstream(go_.string()) << "go\n";
    const auto start = steady_clock::now();
    const int code = l.Wait(seconds(90));
    *took = steady_clock::now() - start;
    // For RELIABILITY.md.
    std::cout << "dlaunch exited " << code << " "
              << std::chrono::duration_cast<std::chrono::milliseconds>(*took).count()
              << " ms after the ranks went on" << std::endl;
    return code;
  }

  static constexpr const char* kPython = "/usr/bin/python3";
  const fs::path go_ = dir_ / "go";
  std::vector<fs::path> immutable_;
};

// #30: the disk is full before the job starts: no heartbeat.json was ever written.
TEST_F(FullDiskPythonTest, HangIsFoundWhenTheDiskIsFullFromTheStart) {
  FillDisk();
  auto l = Start("sleep");
  steady_clock::duration took{};
  EXPECT_EQ(GoAndWait(*l, &took), 3) << l->err_text();
  EXPECT_LT(took, kFoundWithin) << l->err_text();
  const std::string err = l->err_text();
  EXPECT_NE(err.find("HANG"), std::string::npos) << err;
  EXPECT_NE(err.find("rank 1: its heartbeat file could not be written (heartbeat.json: [Errno 28] "
                     "No space left on device)"),
            std::string::npos)
      << err;
}

// #30: `chattr +i` on the rank folders once the ranks run: every later heartbeat.json is
// refused (EPERM), so the files say both ranks are between collectives.
TEST_F(FullDiskPythonTest, HangIsFoundWhenTheRankFoldersAreImmutable) {
  auto l = Start("sleep");
  for (int r = 0; r < 2; ++r) {
    if (!SetImmutable(RankDir(r), true)) GTEST_SKIP() << "no chattr +i on this tmpfs";
    immutable_.push_back(RankDir(r));
  }
  steady_clock::duration took{};
  EXPECT_EQ(GoAndWait(*l, &took), 3) << l->err_text();
  EXPECT_LT(took, kFoundWithin) << l->err_text();
  const std::string err = l->err_text();
  EXPECT_NE(err.find("rank 0: its heartbeat file could not be written (heartbeat.json: [Errno 1] "
                     "Operation not permitted)"),
            std::string::npos)
      << err;
  // The run folder itself takes the diagnosis.
  std::ifstream in(RunDir() / "diagnosis.json");
  const auto d = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(d.is_object()) << err;
  EXPECT_EQ(d["kind"], "hang") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
  EXPECT_EQ(d["seq"], 3) << d.dump(2);
}

// #30: the disk fills after the agents' first heartbeats (before any collective), then rank 1
// stops (SIGSTOP) after 3 collectives. It is shown at that newest state, not at the first
// heartbeat.json, the one the disk kept.
TEST_F(FullDiskPythonTest, StoppedRankIsShownAtItsNewestState) {
  auto l = Start("stop", "start");
  ASSERT_TRUE(fs::exists(RankDir(1) / "heartbeat.json"));
  FillDisk();
  steady_clock::duration took{};
  EXPECT_EQ(GoAndWait(*l, &took), 3) << l->err_text();
  EXPECT_LT(took, kFoundWithin) << l->err_text();
  const std::string err = l->err_text();
  EXPECT_NE(err.find("T (stopped)"), std::string::npos) << err;
  EXPECT_NE(err.find("rank 1 [culprit]: never entered #3; last completed #2;"), std::string::npos)
      << err;
  // What heartbeat.json still says: the agent's first heartbeat, before any collective.
  EXPECT_EQ(err.find("no collective completed yet"), std::string::npos) << err;
}

}  // namespace
}  // namespace dlaunch::testing
