// The straggler verdicts of a job reach its diagnosis: diagnosis.json's "stragglers" and a block
// of diagnosis.txt, read offline from summary.json (or an earlier diagnosis.json when the summary
// has none).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/run_dir/run_dir.h"
#include "launcher/diagnose/analyzer.h"
#include "launcher/diagnose/diagnosis_writer.h"
#include "launcher/diagnose/run_snapshot.h"
#include "tests/diagnose/test_util.h"

namespace dlaunch::launcher {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

rundir::StragglerVerdict Verdict(int rank, int64_t start_step, int64_t end_step) {
  rundir::StragglerVerdict v;
  v.rank = rank;
  v.host = "node0";
  v.relative = 10.69;
  v.step_ms_p50 = 160;
  v.median_ms = 15;
  v.window_steps = 21;
  v.last_share = 1;
  v.start_unix_ms = 1764450000000;
  v.start_step = start_step;
  if (end_step >= 0) {
    v.end_unix_ms = 1764450100000;
    v.end_step = end_step;
  }
  v.text = "straggler: rank " + std::to_string(rank) +
           " (host node0) 10.69x the median step time over the last 21 steps";
  return v;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The fixture's summary.json with `verdicts` added.
void AddToSummary(const std::string& run_dir, std::vector<rundir::StragglerVerdict> verdicts) {
  const std::string path = rundir::RunDir(run_dir).summary();
  rundir::Summary s;
  std::vector<std::string> problems;
  ASSERT_EQ(rundir::ReadSummary(path, "summary.json", &s, &problems), rundir::FileState::kOk);
  s.stragglers = std::move(verdicts);
  rundir::WriteSummary(path, s);
}

TEST(StragglerDiagnosisTest, OfflineDiagnosisCarriesTheSummarysVerdicts) {
  const testing::TestDir tmp("diagnose");
  const std::string run_dir = testing::CopyFixture("hang_never_entered", tmp);
  AddToSummary(run_dir, {Verdict(2, 27, 140), Verdict(1, 150, -1)});
  Diagnosis d = AnalyzeRunDir(run_dir);
  EXPECT_EQ(d.kind, DiagnosisKind::kHang) << "the verdict of the hang is unchanged";
  ASSERT_EQ(d.stragglers.size(), 2u);
  EXPECT_EQ(d.stragglers[0].rank, 2);
  EXPECT_EQ(d.stragglers[1].rank, 1);

  const nlohmann::json json =
      nlohmann::json::parse(Slurp(rundir::RunDir(run_dir).diagnosis_json()));
  ASSERT_EQ(json["stragglers"].size(), 2u) << json.dump(1);
  EXPECT_EQ(json["stragglers"][0]["rank"], 2);
  EXPECT_EQ(json["stragglers"][0]["start_step"], 27);
  EXPECT_EQ(json["stragglers"][0]["end_step"], 140);
  EXPECT_EQ(json["stragglers"][1]["end_unix_ms"], 0) << "still on";

  const std::string text = Slurp(rundir::RunDir(run_dir).diagnosis_text());
  EXPECT_THAT(text, HasSubstr("  stragglers of the job:\n"));
  EXPECT_THAT(text, HasSubstr("    straggler: rank 2 (host node0) 10.69x the median step time over "
                              "the last 21 steps (from step 27 to step 140)\n"));
  EXPECT_THAT(text, HasSubstr("straggler: rank 1 (host node0) 10.69x the median step time over "
                              "the last 21 steps (from step 150, still on)\n"));
}

TEST(StragglerDiagnosisTest, HealthyJobsDiagnosisSaysNothingOfStragglers) {
  const testing::TestDir tmp("diagnose");
  const std::string run_dir = testing::CopyFixture("hang_never_entered", tmp);
  Diagnosis d = AnalyzeRunDir(run_dir);
  EXPECT_TRUE(d.stragglers.empty());
  EXPECT_EQ(nlohmann::json::parse(Slurp(rundir::RunDir(run_dir).diagnosis_json()))["stragglers"],
            nlohmann::json::array());
  EXPECT_THAT(FormatDiagnosis(d), Not(HasSubstr("straggler")));
}

TEST(StragglerDiagnosisTest, AnEarlierDiagnosisStandsInForASummaryWithoutThem) {
  const testing::TestDir tmp("diagnose");
  const std::string run_dir = testing::CopyFixture("hang_never_entered", tmp);
  // The live diagnosis of the hang had the verdict; the summary.json left is an older one.
  rundir::Diagnosis live;
  live.kind = DiagnosisKind::kHang;
  live.headline = "HANG";
  live.stragglers = {Verdict(3, 40, -1)};
  rundir::WriteDiagnosis(rundir::RunDir(run_dir), live, "HANG\n");
  RunSnapshot run = LoadRunDir(run_dir);
  ASSERT_EQ(run.stragglers.size(), 1u);
  Diagnosis d = Analyze(run);
  ASSERT_EQ(d.stragglers.size(), 1u);
  EXPECT_EQ(d.stragglers[0].rank, 3);
  EXPECT_THAT(FormatDiagnosis(d), HasSubstr("straggler: rank 3 (host node0)"));
  // The summary's, where it has some, win: they are the job's whole record.
  AddToSummary(run_dir, {Verdict(2, 27, -1)});
  d = Analyze(LoadRunDir(run_dir));
  ASSERT_EQ(d.stragglers.size(), 1u);
  EXPECT_EQ(d.stragglers[0].rank, 2);
}

TEST(StragglerDiagnosisTest, LineSaysWhichStepsItSpanned) {
  EXPECT_THAT(StragglerLine(Verdict(1, 27, 140)), HasSubstr(" (from step 27 to step 140)"));
  EXPECT_THAT(StragglerLine(Verdict(1, 27, -1)), HasSubstr(" (from step 27, still on)"));
  EXPECT_THAT(StragglerLine(Verdict(1, -1, -1)), HasSubstr(" (still on)"));
}

}  // namespace
}  // namespace dlaunch::launcher
