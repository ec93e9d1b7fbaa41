// `dlaunch diagnose` of a synthetic run directory of hundreds of ranks, written by the scale
// generator (benchmarks/scale/make_run_dir.py): the planted culprit is named, and the reader keeps
// no more flight entries per rank than its bound.
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "core/run_dir/run_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/diagnose/analyzer.h"
#include "launcher/diagnose/python_evidence.h"
#include "launcher/diagnose/run_snapshot.h"
#include "tests/common/test_dir.h"

namespace dlaunch::launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kRanks = 300;
constexpr int kEntries = 400;
constexpr int kCulprit = 777 % kRanks;

void Generate(const std::string& out, int python_every) {
  const std::string command = std::string("timeout 60 python3 ") + MAKE_RUN_DIR_PY + " " + out +
                              " --ranks " + std::to_string(kRanks) + " --entries " +
                              std::to_string(kEntries) + " --python-every " +
                              std::to_string(python_every) + " --workers 2 > /dev/null";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command;
}

TEST(DiagnoseScaleTest, NamesThePlantedCulpritOfHundredsOfRanks) {
  const testing::TestDir dir("diagnose-scale");
  Generate(dir.string(), 8);
  RunSnapshot run = LoadRunDir(dir.string());
  ASSERT_EQ(run.world_size, kRanks);
  Diagnosis d = Analyze(run);
  ReadCulpritTorchFlight(d, &run);
  AttachTorchFlight(run, &d);
  NoteSkippedTorchFlight(run, &d);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(kCulprit));
  EXPECT_EQ(d.seq, kEntries - 1);
  EXPECT_THAT(d.headline, HasSubstr("HANG"));
  // Past kTorchDumpsOfEveryRank ranks, the Python ranks' pickles are left unread and said so.
  EXPECT_EQ(run.torch_dumps_skipped, (kRanks + 7) / 8);
  EXPECT_THAT(d.details, ::testing::Contains(HasSubstr("the dumps of 38 ranks not read")));
  EXPECT_TRUE(d.problems.empty()) << d.problems.front();
}

TEST(DiagnoseScaleTest, KeepsTheBoundOfEntriesPerRankAndStillNamesTheCulprit) {
  const testing::TestDir dir("diagnose-scale");
  Generate(dir.string(), 0);
  // A budget of 100 entries a rank: three quarters of every record dropped, the newest kept.
  const rundir::RunFiles files = rundir::ReadRunDir(dir.string(), 0, kRanks * 100);
  ASSERT_EQ(files.world_size, kRanks);
  for (const rundir::RankFiles& r : files.ranks) {
    ASSERT_EQ(r.flight_state, rundir::FileState::kOk) << r.rank;
    const int64_t newest = r.rank == kCulprit ? kEntries - 2 : kEntries - 1;
    ASSERT_EQ(r.flight.entries.size(), 100u) << r.rank;
    EXPECT_EQ(r.flight.entries.back().seq, newest) << r.rank;
    EXPECT_EQ(r.flight.dropped_entries, newest + 1 - 100) << r.rank;
  }
  // The records still overlap at the frontier: nothing to report.
  EXPECT_TRUE(files.problems.empty()) << files.problems.front();
  RunSnapshot run;
  run.run_dir = files.run_dir;
  run.world_size = files.world_size;
  for (const rundir::RankFiles& r : files.ranks) {
    RankRecord record;
    static_cast<rundir::RankFiles&>(record) = r;
    run.ranks.push_back(std::move(record));
  }
  const Diagnosis d = Analyze(run);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(kCulprit));
  EXPECT_EQ(d.seq, kEntries - 1);
}

}  // namespace
}  // namespace dlaunch::launcher
