// A node's rank files reach node 0 as they are on the node: appended, rewritten in place,
// replaced by rename, truncated, removed. The pusher's chunks go straight into node 0's writer
// (WritePushedChunk) in another folder; no network.
#include "launcher/rendezvous/file_push.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "launcher/rendezvous/request_checks.h"
#include "tests/common/test_dir.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

class FilePushTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(node_ / "rank1");
    fs::create_directories(zero_);
  }

  void Write(const std::string& name, const std::string& text, bool append = false) {
    std::ofstream(node_ / "rank1" / name, append ? std::ios::app : std::ios::trunc) << text;
  }
  // Rewrites the first bytes in place, the size unchanged (as the agent rewrites its tail slots).
  void Overwrite(const std::string& name, const std::string& text) {
    std::fstream f(node_ / "rank1" / name, std::ios::in | std::ios::out);
    f.seekp(0);
    f << text;
  }
  static std::string Read(const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::string Copy(const std::string& name) { return Read(zero_ / "rank1" / name); }
  bool Push(RankFilePusher::Check check = RankFilePusher::Check::kQuick) {
    return pusher_.Push({{1, (node_ / "rank1").string()}}, check);
  }

  const testing::TestDir dir_{"fp"};
  const fs::path node_ = dir_.path() / "node1";
  const fs::path zero_ = dir_.path() / "node0";
  std::vector<v1::FileChunk> sent_;
  RankFilePusher pusher_{[this](const v1::FileChunk& c) {
    sent_.push_back(c);
    WritePushedChunk(c, zero_.string());
    return true;
  }};
};

TEST_F(FilePushTest, AnAppendOnlyFileSendsOnlyWhatItGained) {
  Write("stderr.log", std::string(10000, 'a'));
  ASSERT_TRUE(Push());
  sent_.clear();
  Write("stderr.log", "tail\n", true);
  ASSERT_TRUE(Push());
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_FALSE(sent_[0].whole());
  EXPECT_EQ(sent_[0].offset(), 10000);
  EXPECT_EQ(sent_[0].data(), "tail\n");
  EXPECT_EQ(Copy("stderr.log"), std::string(10000, 'a') + "tail\n");
}

TEST_F(FilePushTest, AFileRewrittenInPlaceArrivesAsItIsNow) {
  const std::string blank(64 * 1024, ' ');
  Write("flight_tail.jsonl", blank);
  ASSERT_TRUE(Push());
  EXPECT_EQ(Copy("flight_tail.jsonl"), blank);
  // A slot in the middle changes, the size stays, and the ends look as before.
  std::string now = blank;
  now.replace(30000, 14, "{\"seq\": 3}    ");
  {
    std::fstream f(node_ / "rank1" / "flight_tail.jsonl", std::ios::in | std::ios::out);
    f.seekp(30000);
    f << "{\"seq\": 3}    ";
  }
  ASSERT_TRUE(Push());
  EXPECT_EQ(Copy("flight_tail.jsonl"), now);
  // Growing while its start changes too: a whole version, not an append.
  Overwrite("flight_tail.jsonl", "X");
  Write("flight_tail.jsonl", "more", true);
  ASSERT_TRUE(Push());
  EXPECT_EQ(Copy("flight_tail.jsonl"), "X" + now.substr(1) + "more");
}

// As the Python agent writes its flight tail: through a shared mapping, whose writes leave the
// file's times as they were until the kernel writes the pages back.
TEST_F(FilePushTest, AFileWrittenThroughASharedMappingArrivesAsItIsNow) {
  Write("flight_tail.jsonl", std::string(64 * 1024, ' '));
  const fs::path path = node_ / "rank1" / "flight_tail.jsonl";
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  void* map = ::mmap(nullptr, 64 * 1024, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED);
  char* bytes = static_cast<char*>(map);
  bytes[0] = '{';  // the page is dirty from here on: later writes leave the times alone
  ASSERT_TRUE(Push());
  for (int seq = 0; seq < 3; ++seq) {
    const std::string line = "{\"seq\": " + std::to_string(seq) + "}";
    std::memcpy(bytes + 1024 * seq, line.data(), line.size());
    ASSERT_TRUE(Push());
    EXPECT_EQ(Copy("flight_tail.jsonl"), std::string(bytes, 64 * 1024)) << seq;
  }
  ::munmap(map, 64 * 1024);
  ::close(fd);
}

TEST_F(FilePushTest, ReplacedTruncatedAndRemovedFilesFollow) {
  Write("heartbeat.json", "{\"step\": 1, \"pad\": \"" + std::string(9000, 'x') + "\"}");
  ASSERT_TRUE(Push());
  // Replaced by rename: a new inode.
  Write("heartbeat.json.new", "{\"step\": 2}");
  fs::rename(node_ / "rank1" / "heartbeat.json.new", node_ / "rank1" / "heartbeat.json");
  ASSERT_TRUE(Push());
  EXPECT_EQ(Copy("heartbeat.json"), "{\"step\": 2}");
  // Truncated to nothing.
  Write("heartbeat.json", "");
  ASSERT_TRUE(Push());
  EXPECT_TRUE(fs::exists(zero_ / "rank1" / "heartbeat.json"));
  EXPECT_EQ(Copy("heartbeat.json"), "");
  // Removed.
  fs::remove(node_ / "rank1" / "heartbeat.json");
  ASSERT_TRUE(Push());
  EXPECT_FALSE(fs::exists(zero_ / "rank1" / "heartbeat.json"));
  // Node 0 never holds a half version aside.
  for (const auto& e : fs::directory_iterator(zero_ / "rank1")) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  }
}

TEST_F(FilePushTest, AnUnchangedFileIsNotSentAgainAndAThoroughPushFindsNothingNew) {
  Write("error.json", "{}");
  ASSERT_TRUE(Push());
  sent_.clear();
  ASSERT_TRUE(Push());
  ASSERT_TRUE(Push(RankFilePusher::Check::kThorough));
  EXPECT_TRUE(sent_.empty());
}

TEST_F(FilePushTest, AFailedSendIsRetriedWholeAtTheNextPush) {
  Write("py_stacks.txt", "first");
  bool up = false;
  RankFilePusher flaky([&](const v1::FileChunk& c) {
    if (!up) return false;
    WritePushedChunk(c, zero_.string());
    return true;
  });
  EXPECT_FALSE(flaky.Push({{1, (node_ / "rank1").string()}}));
  up = true;
  EXPECT_TRUE(flaky.Push({{1, (node_ / "rank1").string()}}));
  EXPECT_EQ(Copy("py_stacks.txt"), "first");
}

}  // namespace
}  // namespace dlaunch::launcher
