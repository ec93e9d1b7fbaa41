// A full log disk never turns a good job into a failed one: the logs cut short are named once,
// summary.json is still written (in the room kept for it, or in a second place that is named).
// Uses a tiny tmpfs as the log disk, so it needs root (CAP_SYS_ADMIN); skipped otherwise.
#include <sys/mount.h>

#include <fstream>

#include "durability_harness.h"

namespace dlaunch::testing {
namespace {

using std::chrono::seconds;

class FullDiskTest : public DurabilityTest {
 protected:
  void SetUp() override {
    DurabilityTest::SetUp();
    fs::create_directories(log_dir_);
    if (::mount("tmpfs", log_dir_.c_str(), "tmpfs", 0, "size=2m") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs (needs root): " << std::strerror(errno);
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount2(log_dir_.c_str(), MNT_DETACH);
    DurabilityTest::TearDown();
  }
  bool mounted_ = false;
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
  {
    std::ofstream filler(log_dir_ / "filler", std::ios::binary);
    const std::string block(1 << 16, 'x');
    for (int i = 0; i < 64 && filler.write(block.data(), block.size()); ++i) {
    }
  }
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

}  // namespace
}  // namespace dlaunch::testing
