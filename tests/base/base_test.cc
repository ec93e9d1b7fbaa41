#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "core/base/clock.h"
#include "core/base/files.h"
#include "core/base/format.h"
#include "core/base/proc.h"
#include "core/error.h"
#include "gtest/gtest.h"
#include "tests/common/test_dir.h"

namespace dlaunch::base {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(FormatTest, Bytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(4 << 20), "4 MiB");
  EXPECT_EQ(FormatBytes(3 << 29), "1.5 GiB");
  EXPECT_EQ(FormatBytes(-1), "?");
  EXPECT_EQ(FormatBytes(64 << 20, ByteStyle::kOneDecimal), "64.0 MiB");
  EXPECT_EQ(FormatBytes(512 << 10, ByteStyle::kOneDecimal), "512 KiB");
  EXPECT_EQ(FormatBytes(100, ByteStyle::kOneDecimal), "100 B");
}

TEST(FormatTest, Hex) {
  const unsigned char bytes[] = {0x00, 0x0f, 0xa5, 0xff};
  EXPECT_EQ(FormatHex(bytes, sizeof(bytes)), "000fa5ff");
  const std::string r = RandomHex(16);
  EXPECT_EQ(r.size(), 32u);
  EXPECT_EQ(r.find_first_not_of("0123456789abcdef"), std::string::npos) << r;
  EXPECT_NE(RandomHex(16), r);  // 2^-128 to fail by chance
}

TEST(FormatTest, DurationsRanksTimesSignals) {
  EXPECT_EQ(FormatDurationMs(40), "40 ms");
  EXPECT_EQ(FormatDurationMs(2500), "2.5 s");
  EXPECT_EQ(FormatDurationMs(310000), "310 s");
  EXPECT_EQ(FormatRankList({3, 0, 1, 1}), "0,1,3");
  EXPECT_EQ(FormatRankList({0, 1, 2, 3, 4, 5, 7}), "0-5,7");
  EXPECT_EQ(NameRanks({3}), "rank 3");
  EXPECT_EQ(NameRanks({3, 3}), "rank 3");
  EXPECT_EQ(NameRanks({3, 0, 1, 2, 6, 8, 9}), "ranks 0-3,6,8,9");
  EXPECT_EQ(JoinInts({3, 1, 2}), "3,1,2");
  EXPECT_EQ(JoinInts({3, 1}, ", "), "3, 1");
  EXPECT_EQ(FormatUnixMs(1764450000000), "2025-11-29 21:00:00 UTC");
  EXPECT_EQ(FormatUnixMs(0), "?");
  EXPECT_EQ(SignalName(9), "SIGKILL");
  EXPECT_EQ(SignalName(200), "signal 200");
  EXPECT_EQ(SignalNumber("SIGABRT"), 6);
  EXPECT_EQ(SignalNumber("TERM"), 15);
  EXPECT_EQ(SignalNumber("9"), 9);
  EXPECT_EQ(SignalNumber("nonsense"), 0);
  EXPECT_EQ(SignalNumber("99999999999999"), 0);
}

TEST(ClockTest, WallClockUnits) {
  const int64_t ms = UnixMillis();
  const int64_t ns = UnixNanos();
  EXPECT_GT(ms, 1700000000000);
  EXPECT_NEAR(static_cast<double>(ns / 1000000), static_cast<double>(ms), 1000);
}

TEST(ProcTest, StatusAndHost) {
  EXPECT_GT(ProcStatusBytes("VmRSS"), 0);
  EXPECT_EQ(ProcStatusBytes("NoSuchField"), -1);
  EXPECT_GT(CurrentRssBytes(), 0);
  EXPECT_GE(PeakRssBytes(), CurrentRssBytes());
  EXPECT_FALSE(Hostname().empty());
}

TEST(FilesTest, AtomicWriteReplacesAndLeavesNoTemporaryFile) {
  const testing::TestDir dir("base");
  const std::string path = dir.string() + "/a.json";
  WriteFileAtomically(path, "one");
  WriteFileAtomically(path, "two");
  std::string text;
  EXPECT_EQ(ReadFileBounded(path, 100, &text), ReadStatus::kOk);
  EXPECT_EQ(text, "two");
  EXPECT_EQ(Names(dir.string()), std::vector<std::string>{"a.json"});
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  mode_t mask = ::umask(022);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0644 & ~mask);
}

// Two dumps of one process at once once shared a temporary name and left 0-byte files.
TEST(FilesTest, ConcurrentWritersOfOnePathNeverShareATemporaryFile) {
  const testing::TestDir dir("base");
  const std::string path = dir.string() + "/flight.json";
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t) {
    writers.emplace_back([&, t] {
      const std::string content(4096 + t, static_cast<char>('a' + t));
      for (int i = 0; i < 50; ++i) WriteFileAtomically(path, content);
    });
  }
  for (auto& w : writers) w.join();
  std::string text;
  ASSERT_EQ(ReadFileBounded(path, 1 << 20, &text), ReadStatus::kOk);
  ASSERT_GE(text.size(), 4096u);
  EXPECT_EQ(text, std::string(text.size(), text[0]));  // one writer's content, whole
  EXPECT_EQ(Names(dir.string()), std::vector<std::string>{"flight.json"});
}

TEST(FilesTest, FailedWriteRemovesItsTemporaryFile) {
  const testing::TestDir dir("base");
  fs::create_directory(dir.string() + "/target");  // rename over a directory fails
  EXPECT_THROW(WriteFileAtomically(dir.string() + "/target", "x"), Error);
  EXPECT_EQ(Names(dir.string()), std::vector<std::string>{"target"});
  EXPECT_THROW(WriteFileAtomically(dir.string() + "/missing/x.json", "x"), Error);
  EXPECT_TRUE(IsAtomicWriteTemporary("flight.json.tmp.Ab12Cd"));
  EXPECT_FALSE(IsAtomicWriteTemporary("flight.json"));
}

TEST(FilesTest, BoundedReadsRefuseFifosAndCapSizes) {
  const testing::TestDir dir("base");
  const std::string fifo = dir.string() + "/events.jsonl";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  std::string text;
  EXPECT_EQ(ReadFileBounded(fifo, 100, &text), ReadStatus::kNotRegular);  // does not block
  EXPECT_TRUE(TailLines(fifo, 3).empty());
  EXPECT_EQ(ReadFileBounded(dir.string(), 100, &text), ReadStatus::kNotRegular);
  EXPECT_EQ(ReadFileBounded(dir.string() + "/nope", 100, &text), ReadStatus::kMissing);

  const std::string big = dir.string() + "/big.log";
  {
    std::ofstream out(big);
    for (int i = 0; i < 10000; ++i) out << "line " << i << "\n";
  }
  EXPECT_EQ(ReadFileBounded(big, 10, &text), ReadStatus::kTooLarge);
  EXPECT_EQ(text, "line 0\nlin");
  EXPECT_EQ(ReadFileTail(big, 10, &text), ReadStatus::kTooLarge);
  EXPECT_EQ(text, "line 9999\n");
  EXPECT_EQ(TailLines(big, 2, 100), (std::vector<std::string>{"line 9998", "line 9999"}));
  EXPECT_GT(MtimeUnixMs(big), 0);
  EXPECT_EQ(MtimeUnixMs(dir.string() + "/nope"), 0);
}

TEST(FilesTest, ReadWholeFileNamesTheFlag) {
  try {
    ReadWholeFile("/nonexistent/token", "--token-file");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--token-file"), std::string::npos);
  }
}

}  // namespace
}  // namespace dlaunch::base
