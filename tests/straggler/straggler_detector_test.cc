// The straggler detector's logic, fed heartbeat counters and arrivals by hand.
#include "launcher/straggler/straggler_detector.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/run_dir/diagnosis_file.h"
#include "core/run_dir/summary_file.h"

namespace dlaunch::launcher {
namespace {

// Feeds every rank `beats` heartbeats of `steps_per_beat` steps, rank r's steps taking ms[r]
// busy milliseconds each; Evaluate after every beat. Returns every change.
struct FakeJob {
  explicit FakeJob(std::vector<double> ms, StragglerOptions o = {})
      : step_ms(std::move(ms)),
        detector(static_cast<int>(step_ms.size()), o),
        steps(step_ms.size(), 0),
        busy(step_ms.size(), 0) {
    for (size_t r = 0; r < step_ms.size(); ++r) {
      detector.SetHost(static_cast<int>(r), r % 2 ? "b" : "a");
      detector.ObserveSteps(static_cast<int>(r), 0, 0);
    }
  }
  std::vector<StragglerDetector::Change> Beat(int beats, int steps_per_beat = 5) {
    std::vector<StragglerDetector::Change> all;
    for (int b = 0; b < beats; ++b) {
      for (size_t r = 0; r < step_ms.size(); ++r) {
        steps[r] += steps_per_beat;
        busy[r] += steps_per_beat * step_ms[r];
        detector.ObserveSteps(static_cast<int>(r), steps[r], busy[r]);
      }
      now += 1000;
      detector.SetJobStep(steps[0]);
      for (auto& c : detector.Evaluate(now)) all.push_back(c);
    }
    return all;
  }
  std::vector<double> step_ms;
  StragglerDetector detector;
  std::vector<int64_t> steps;
  std::vector<double> busy;
  int64_t now = 1'000'000;
};

TEST(StragglerDetector, HealthyRanksGiveNoVerdict) {
  FakeJob job({20, 21, 19.5, 20.4});
  EXPECT_TRUE(job.Beat(100).empty());
  EXPECT_TRUE(job.detector.Verdicts().empty());
  for (const StragglerScore& s : job.detector.Scores()) {
    EXPECT_NEAR(s.relative, 1.0, 0.1) << s.rank;
    EXPECT_EQ(s.window_steps, 200) << s.rank;  // the window, whole intervals
  }
}

TEST(StragglerDetector, SlowRankIsNamedOnceWithItsFigures) {
  FakeJob job({20, 20, 20, 170});
  auto changes = job.Beat(4);  // 20 steps in the window after 4 beats of 5
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_TRUE(changes[0].started);
  const rundir::StragglerVerdict& v = changes[0].verdict;
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.host, "b");
  EXPECT_NEAR(v.relative, 8.5, 1e-9);
  EXPECT_NEAR(v.median_ms, 20, 1e-9);
  EXPECT_EQ(v.start_step, 20);
  EXPECT_EQ(v.text, "straggler: rank 3 (host b) 8.50x the median step time over the last 20 steps");
  EXPECT_TRUE(job.Beat(50).empty()) << "said once, while it lasts";
  EXPECT_EQ(job.detector.ActiveCount(), 1);
}

TEST(StragglerDetector, NotBeforeMinSteps) {
  FakeJob job({20, 170});
  EXPECT_TRUE(job.Beat(3).empty());  // 15 steps
  EXPECT_EQ(job.Beat(1).size(), 1u);
  // Two ranks: relative to the other one, not to a median of both that would cap it below 2.
  EXPECT_NEAR(job.detector.Scores()[1].relative, 8.5, 1e-9);
  EXPECT_NEAR(job.detector.Scores()[0].relative, 20.0 / 170, 1e-9);
}

TEST(StragglerDetector, EndsOnceWhenTheRankRecovers) {
  StragglerOptions o;
  o.window_steps = 50;
  FakeJob job({20, 20, 60}, o);
  ASSERT_EQ(job.Beat(10).size(), 1u);
  job.step_ms[2] = 20;
  auto changes = job.Beat(20);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_FALSE(changes[0].started);
  EXPECT_EQ(changes[0].verdict.rank, 2);
  EXPECT_GT(changes[0].verdict.end_unix_ms, 0);
  EXPECT_EQ(changes[0].verdict.text.rfind("straggler ended: rank 2 (host a) back to 1.", 0), 0u)
      << changes[0].verdict.text;
  ASSERT_EQ(job.detector.Verdicts().size(), 1u);
  EXPECT_NEAR(job.detector.Verdicts()[0].relative, 3.0, 1e-9) << "keeps the figures it began on";
  EXPECT_EQ(job.detector.ActiveCount(), 0);
}

TEST(StragglerDetector, HysteresisKeepsARankNearTheLineFromFlapping) {
  FakeJob job({20, 20, 25.0});  // 1.25x: named
  ASSERT_EQ(job.Beat(10).size(), 1u);
  job.step_ms[2] = 23;  // 1.15x: under the threshold, over the midpoint (1.1x)
  EXPECT_TRUE(job.Beat(60).empty());
  EXPECT_EQ(job.detector.ActiveCount(), 1);
}

TEST(StragglerDetector, OneSlowHeartbeatIsNoStraggler) {
  // Fast steps, many a heartbeat: one second in which rank 1 lacked a core is no verdict, though
  // its 28 steps alone fill min_steps.
  FakeJob job({25, 25});
  job.step_ms[1] = 36;
  EXPECT_TRUE(job.Beat(1, 28).empty());
  EXPECT_LT(job.detector.Scores()[1].relative, 0) << "not judged on one interval";
  job.step_ms[1] = 25;
  EXPECT_TRUE(job.Beat(20, 28).empty());
  // Slow for most of the window, it is named.
  job.step_ms[1] = 36;
  EXPECT_EQ(job.Beat(10, 28).size(), 1u);
}

TEST(StragglerDetector, SmallAbsoluteExcessIsNoStraggler) {
  FakeJob job({2, 2, 4});  // 2x, but 2 ms: scheduling noise on a busy machine
  EXPECT_TRUE(job.Beat(30).empty());
}

TEST(StragglerDetector, ThresholdAndWindowAreHonoured) {
  StragglerOptions o;
  o.threshold = 2.0;
  o.window_steps = 30;
  FakeJob job({20, 20, 30}, o);
  EXPECT_TRUE(job.Beat(40).empty());
  EXPECT_EQ(job.detector.Scores()[2].window_steps, 30);
}

TEST(StragglerDetector, RestartedCountersStartTheWindowAfresh) {
  FakeJob job({20, 20});
  job.Beat(10);
  job.detector.ObserveSteps(0, 3, 60);  // counters went back
  EXPECT_EQ(job.detector.Scores()[0].window_steps, 0);
  EXPECT_LT(job.detector.Scores()[0].step_ms_p50, 0);
}

TEST(StragglerDetector, LastToEnterShareFromArrivals) {
  StragglerDetector d(3, {});
  // 10 collectives: rank 2 enters last in 8 of them, rank 0 in 2.
  for (int r = 0; r < 3; ++r) {
    std::vector<int64_t> starts;
    for (int seq = 0; seq < 10; ++seq) {
      const int last = seq < 8 ? 2 : 0;
      starts.push_back(1'000'000 + seq * 1000 + (r == last ? 500 : r * 10));
    }
    d.ObserveArrivals(r, 0, starts);
  }
  d.Evaluate(1);
  auto scores = d.Scores();
  EXPECT_EQ(scores[2].collectives, 10);
  EXPECT_NEAR(scores[2].last_share, 0.8, 1e-9);
  EXPECT_NEAR(scores[0].last_share, 0.2, 1e-9);
  EXPECT_NEAR(scores[1].last_share, 0.0, 1e-9);
}

TEST(StragglerDetector, ArrivalsWaitForEveryRankAndSkipWhatARankLost) {
  StragglerDetector d(2, {});
  d.ObserveArrivals(0, 0, {10, 20, 30, 40});
  d.Evaluate(1);
  EXPECT_EQ(d.Scores()[0].collectives, 0) << "rank 1 has said nothing yet";
  d.ObserveArrivals(1, 2, {35, 45});  // seqs 0-1 fell out of its ring
  d.Evaluate(2);
  EXPECT_EQ(d.Scores()[1].collectives, 2);
  EXPECT_NEAR(d.Scores()[1].last_share, 1.0, 1e-9);
  d.ObserveArrivals(0, 0, {10, 20, 30, 40, 99});  // repeats are ignored, seq 4 waits
  d.Evaluate(3);
  EXPECT_EQ(d.Scores()[1].collectives, 2);
}

TEST(StragglerDetector, VerdictTextNamesTheLastToEnterShare) {
  FakeJob job({20, 170});
  for (int r = 0; r < 2; ++r) {
    std::vector<int64_t> starts;
    for (int seq = 0; seq < 20; ++seq) starts.push_back(1000 + seq * 100 + (r == 1 ? 50 : 0));
    job.detector.ObserveArrivals(r, 0, starts);
  }
  auto changes = job.Beat(4);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].verdict.text,
            "straggler: rank 1 (host b) 8.50x the median step time over the last 20 steps; last "
            "to enter 100% of collectives");
}

TEST(StragglerDetector, ResetEndsActiveVerdictsAndKeepsThem) {
  FakeJob job({20, 170});
  job.Beat(5);
  job.detector.Reset(42);
  ASSERT_EQ(job.detector.Verdicts().size(), 1u);
  EXPECT_EQ(job.detector.Verdicts()[0].end_unix_ms, 42);
  EXPECT_EQ(job.detector.ActiveCount(), 0);
  EXPECT_EQ(job.detector.Scores()[1].window_steps, 0);
}

// summary.json and diagnosis.json carry the verdicts; writer and reader agree.
TEST(StragglerVerdicts, RoundTripInSummaryAndDiagnosis) {
  rundir::StragglerVerdict v;
  v.rank = 5;
  v.host = "b";
  v.relative = 1.41;
  v.step_ms_p50 = 212.5;
  v.median_ms = 150.7;
  v.window_steps = 200;
  v.last_share = 0.93;
  v.start_unix_ms = 1700;
  v.end_unix_ms = 1900;
  v.start_step = 31;
  v.end_step = 400;
  v.text = "straggler: rank 5 (host b) 1.41x the median step time over the last 200 steps";
  rundir::Summary s;
  s.run_id = "r";
  s.stragglers = {v};
  const std::string path = ::testing::TempDir() + "/straggler_summary.json";
  rundir::WriteSummary(path, s);
  rundir::Summary back;
  std::vector<std::string> problems;
  ASSERT_EQ(rundir::ReadSummary(path, "summary.json", &back, &problems), rundir::FileState::kOk);
  ASSERT_EQ(back.stragglers.size(), 1u);
  const rundir::StragglerVerdict& b = back.stragglers[0];
  EXPECT_EQ(b.rank, 5);
  EXPECT_EQ(b.host, "b");
  EXPECT_DOUBLE_EQ(b.relative, 1.41);
  EXPECT_DOUBLE_EQ(b.step_ms_p50, 212.5);
  EXPECT_DOUBLE_EQ(b.median_ms, 150.7);
  EXPECT_EQ(b.window_steps, 200);
  EXPECT_DOUBLE_EQ(b.last_share, 0.93);
  EXPECT_EQ(b.start_unix_ms, 1700);
  EXPECT_EQ(b.end_unix_ms, 1900);
  EXPECT_EQ(b.start_step, 31);
  EXPECT_EQ(b.end_step, 400);
  EXPECT_EQ(b.text, v.text);

  rundir::Diagnosis d;
  d.stragglers = {v, v};
  const rundir::Diagnosis dback = rundir::DiagnosisFromJson(rundir::DiagnosisToJson(d));
  ASSERT_EQ(dback.stragglers.size(), 2u);
  EXPECT_EQ(dback.stragglers[1].text, v.text);
  EXPECT_DOUBLE_EQ(dback.stragglers[1].last_share, 0.93);

  // No verdicts: summary.json leaves the field out, and a reader finds none.
  rundir::Summary none;
  EXPECT_EQ(rundir::SummaryToJson(none).find("stragglers"), std::string::npos);
}

}  // namespace
}  // namespace dlaunch::launcher
