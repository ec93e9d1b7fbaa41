// Straggler verdicts in summary.json and diagnosis.json: what the launcher writes, a reader (the
// diagnosis, the Python side) reads back, field by field; a damaged array gives what it can.
#include "core/run_dir/straggler_verdicts.h"

#include <nlohmann/json.hpp>

#include "core/run_dir/run_dir.h"
#include "gtest/gtest.h"
#include "tests/common/test_dir.h"

namespace dlaunch::rundir {
namespace {

using nlohmann::json;

std::vector<StragglerVerdict> TwoVerdicts() {
  StragglerVerdict ended;
  ended.rank = 1;
  ended.host = "b";
  ended.relative = 10.69;
  ended.step_ms_p50 = 160.5;
  ended.median_ms = 15.01;
  ended.window_steps = 200;
  ended.last_share = 0.93;
  ended.start_unix_ms = 1000;
  ended.end_unix_ms = 9000;
  ended.start_step = 27;
  ended.end_step = 140;
  ended.text = "straggler: rank 1 (host b) 10.69x the median step time over the last 200 steps";
  StragglerVerdict active;
  active.rank = 3;
  active.host = "c";
  active.relative = 1.41;
  active.window_steps = 40;
  active.start_step = 150;
  active.text = "straggler: rank 3 (host c) 1.41x the median step time over the last 40 steps";
  return {ended, active};
}

void ExpectSame(const std::vector<StragglerVerdict>& a, const std::vector<StragglerVerdict>& b) {
  EXPECT_EQ(StragglersToJson(a), StragglersToJson(b));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].rank, b[i].rank);
    EXPECT_EQ(a[i].start_step, b[i].start_step);
    EXPECT_EQ(a[i].end_unix_ms, b[i].end_unix_ms);
    EXPECT_DOUBLE_EQ(a[i].relative, b[i].relative);
    EXPECT_DOUBLE_EQ(a[i].last_share, b[i].last_share);
  }
}

TEST(StragglerVerdictsTest, RoundTripInSummary) {
  const testing::TestDir dir("run-dir");
  Summary s;
  s.run_id = "r";
  s.stragglers = TwoVerdicts();
  const std::string path = RunDir(dir.string()).summary();
  WriteSummary(path, s);
  Summary back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadSummary(path, "summary.json", &back, &problems), FileState::kOk);
  EXPECT_TRUE(problems.empty());
  ExpectSame(back.stragglers, s.stragglers);
  // None: the key is left out.
  EXPECT_FALSE(json::parse(SummaryToJson(Summary{})).contains("stragglers"));
}

TEST(StragglerVerdictsTest, RoundTripInDiagnosis) {
  const testing::TestDir dir("run-dir");
  Diagnosis d;
  d.kind = DiagnosisKind::kHang;
  d.headline = "HANG";
  d.stragglers = TwoVerdicts();
  const RunDir run(dir.string());
  WriteDiagnosis(run, d, "text\n");
  Diagnosis back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadDiagnosis(run.diagnosis_json(), "diagnosis.json", &back, &problems),
            FileState::kOk);
  EXPECT_TRUE(problems.empty());
  ExpectSame(back.stragglers, d.stragglers);
  EXPECT_EQ(DiagnosisToJson(back), DiagnosisToJson(d));
  // None: an empty array, so a reader can tell "none" from an older file.
  EXPECT_EQ(DiagnosisToJson(Diagnosis{})["stragglers"], json::array());
}

TEST(StragglerVerdictsTest, DamagedArrayGivesWhatItCan) {
  const json doc = {
      {"stragglers",
       json::array({7, "x", {{"rank", "one"}, {"text", 5}}, {{"rank", 2}, {"relative", 1.5}}})}};
  const std::vector<StragglerVerdict> v = StragglersFromJson(doc, "stragglers");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].rank, -1);
  EXPECT_EQ(v[0].text, "");
  EXPECT_EQ(v[1].rank, 2);
  EXPECT_DOUBLE_EQ(v[1].relative, 1.5);
  EXPECT_EQ(v[1].last_share, -1);
  EXPECT_TRUE(StragglersFromJson(json{{"stragglers", "no"}}, "stragglers").empty());
  EXPECT_TRUE(StragglersFromJson(json::object(), "stragglers").empty());
}

}  // namespace
}  // namespace dlaunch::rundir
