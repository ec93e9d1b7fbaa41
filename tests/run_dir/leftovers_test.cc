// #30: temporary files left by ranks killed mid-write (15 files in 8 of 30 train kills, 7 of them
// an error.json.tmp with no error.json, so the error was lost).
#include "core/run_dir/leftovers.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/run_dir/error_file.h"
#include "tests/common/test_dir.h"

namespace dlaunch::rundir {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

std::set<std::string> Names(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

TEST(LeftoversTest, AWholeErrorFileIsKeptAndEveryOtherTemporaryFileRemoved) {
  dlaunch::testing::TestDir dir("leftovers");
  const fs::path rank = dir.path();
  ErrorReport report;
  report.rank = 3;
  report.kind = "error";
  report.message = "loss exploded";
  WriteError((rank / "written").string(), report);
  fs::rename(rank / "written", rank / "error.json.tmp.4242.7.1");        // killed before the rename
  Write(rank / "error.json.tmp.4242.7.2", "{\"schema\":\"dlaunch.err");  // killed mid-write
  Write(rank / "flight.json.tmp.Ab12Cd", "{");
  Write(rank / "heartbeat.json.tmp", "{}");
  Write(rank / "events.jsonl", "{}\n");
  fs::create_symlink("/etc/hostname", rank / "stdout.log.tmp.x");  // never followed or removed

  const LeftoverSweep sweep = SweepLeftoverTemps(rank.string());
  EXPECT_EQ(sweep.recovered, std::vector<std::string>{"error.json"});
  EXPECT_EQ(sweep.removed, 3);
  EXPECT_EQ(Names(rank), (std::set<std::string>{"error.json", "events.jsonl", "stdout.log.tmp.x"}));
  ErrorReport back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadError((rank / "error.json").string(), "e", &back, &problems), FileState::kOk);
  EXPECT_EQ(back.message, "loss exploded");
  EXPECT_EQ(back.rank, 3);
}

TEST(LeftoversTest, AnErrorFileInPlaceIsNeverReplaced) {
  dlaunch::testing::TestDir dir("leftovers");
  const fs::path rank = dir.path();
  ErrorReport first, second;
  first.message = "the first";
  second.message = "a later one";
  WriteError((rank / "error.json").string(), first);
  WriteError((rank / "later").string(), second);
  fs::rename(rank / "later", rank / "error.json.tmp.1.2.3");
  const LeftoverSweep sweep = SweepLeftoverTemps(rank.string());
  EXPECT_TRUE(sweep.recovered.empty());
  EXPECT_EQ(sweep.removed, 1);
  ErrorReport back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadError((rank / "error.json").string(), "e", &back, &problems), FileState::kOk);
  EXPECT_EQ(back.message, "the first");
  EXPECT_EQ(SweepLeftoverTemps((rank / "absent").string()).removed, 0);  // no folder: nothing
}

}  // namespace
}  // namespace dlaunch::rundir
