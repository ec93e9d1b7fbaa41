// A Python DDP rank slowed by 150 ms per step is named a straggler within 50 steps; a healthy job
// gets no verdict. Real torch (1.13, and the torch 2.x venv in the torch2 tier), real Gloo.
#include <gtest/gtest.h>

#include "core/run_dir/job_events.h"
#include "python_test_util.h"

namespace dlaunch::testing {
namespace {

class PythonStragglerTest : public PythonJobTest {
 protected:
  nlohmann::json Run(int nproc, int steps, int slow_rank, const std::string& extra = "") {
    std::vector<std::string> args = {"--nproc",
                                     std::to_string(nproc),
                                     "--events-file",
                                     (dir_ / "events.jsonl").string(),
                                     "--",
                                     Script("ddp_straggler.py"),
                                     std::to_string(steps),
                                     std::to_string(slow_rank),
                                     "150"};
    if (!extra.empty()) args.push_back(extra);
    Launched job(Cmd(args));
    EXPECT_EQ(job.Wait(std::chrono::seconds(150)), 0);
    err_ = job.err_lines;
    return ReadJson(RunDir() / "summary.json");
  }
  std::vector<std::string> err_;
};

void ExpectNamed(const nlohmann::json& summary, int rank) {
  ASSERT_TRUE(summary.contains("stragglers")) << summary.dump(1);
  ASSERT_EQ(summary["stragglers"].size(), 1u) << summary["stragglers"].dump(1);
  const auto& v = summary["stragglers"][0];
  EXPECT_EQ(v["rank"], rank);
  EXPECT_GE(v["relative"].get<double>(), 1.2);
  EXPECT_GE(v["start_step"].get<int64_t>(), 0);
  EXPECT_LE(v["start_step"].get<int64_t>(), 50) << "named within 50 steps";
  EXPECT_GE(v["last_share"].get<double>(), 0.5) << "it enters most collectives last";
  EXPECT_EQ(
      v["text"].get<std::string>().rfind("straggler: rank " + std::to_string(rank) + " (host ", 0),
      0u);
}

TEST_F(PythonStragglerTest, SlowRankNamedFromOptimizerSteps) {
  const nlohmann::json summary = Run(2, 70, 1);
  ExpectNamed(summary, 1);
  // Said once on the console, and once in the events file.
  int said = 0;
  for (const auto& l : err_) said += l.find("dlaunch: straggler: rank 1") != std::string::npos;
  EXPECT_EQ(said, 1);
  std::ifstream events(dir_ / "events.jsonl");
  int starts = 0, rank_starts = 0, rank_exits = 0;
  for (std::string line; std::getline(events, line);) {
    rundir::JobEvent e;
    ASSERT_TRUE(rundir::JobEventFromJson(line, &e)) << line;
    EXPECT_EQ(e.run_id, "run");
    EXPECT_EQ(line.find("TOKEN"), std::string::npos) << "no secrets in events";
    starts += e.kind == rundir::JobEventKind::kStragglerStart && e.rank == 1;
    rank_starts += e.kind == rundir::JobEventKind::kRankStart;
    rank_exits += e.kind == rundir::JobEventKind::kRankExit && e.exit_code == 0;
  }
  EXPECT_EQ(starts, 1);
  EXPECT_EQ(rank_starts, 2);
  EXPECT_EQ(rank_exits, 2);
}

TEST_F(PythonStragglerTest, SlowRankNamedFromDdpForwardsWithoutAnOptimizer) {
  ExpectNamed(Run(2, 70, 0, "no-optimizer"), 0);
}

TEST_F(PythonStragglerTest, HealthyJobHasNoStraggler) {
  const nlohmann::json summary = Run(2, 150, -1);
  EXPECT_FALSE(summary.contains("stragglers")) << summary.dump(1);
}

}  // namespace
}  // namespace dlaunch::testing
