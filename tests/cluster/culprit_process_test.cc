// The root cause after another node's rank failed: two real launchers on loopback, a rank of node
// 1 dies (SIGKILL, exit 1, a Python raise), node 0's ranks and node 1's other rank are torn down.
// summary.json, diagnosis.json and the console's root-cause block on both launchers name the
// failed rank and its node, never a rank that was torn down because of it.
#include <gtest/gtest.h>

#include "core/run_dir/paths.h"
#include "launcher/diagnose/diagnosis.h"
#include "launchers_fixture.h"

namespace dlaunch::testing {
namespace {

// Rank 3 (node 1, local rank 1) ends as `how` once it started; the others wait to be torn down.
std::string Script(const std::string& how) {
  return "echo restart $TORCHELASTIC_RESTART_COUNT; "
         "if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then "
         "  if [ $RANK = 3 ]; then sleep 0.3; echo dying >&2; " +
         how + "; fi; exec sleep 60; fi";
}

class CulpritTest : public ElasticJobTest {
 protected:
  // As in a collective: rank 3 is SIGKILLed 0.3 s in, node 0's ranks see their peer gone (here:
  // its pid) and exit 1 within milliseconds, before (or after) node 1's notice reaches node 0.
  // Node 1's other rank runs `rest`.
  std::vector<std::string> PeerGone(const std::string& rest) {
    const std::string pid = (dir_ / "pid").string();
    return {"/bin/sh", "-c",
            "if [ $RANK = 3 ]; then echo $$ > " + pid + ".tmp; mv " + pid + ".tmp " + pid +
                "; sleep 0.3; kill -KILL $$; fi; if [ $RANK -lt 2 ]; then while [ ! -s " + pid +
                " ]; do sleep 0.005; done; while kill -0 $(cat " + pid +
                ") 2>/dev/null; do sleep 0.005; done; echo 'connection reset by peer' >&2; exit "
                "1; fi; " +
                rest};
  }
  // Both launchers, node ranks given so node 1 is the one that fails.
  void Run(const std::vector<std::string>& program, std::vector<std::string> extra,
           int expected_exit) {
    auto with = [&](const char* node) {
      std::vector<std::string> e = {"--node-rank", node};
      e.insert(e.end(), extra.begin(), extra.end());
      return e;
    };
    n0_ = StartProgram("n0", "2", program, with("0"));
    n1_ = StartProgram("n1", "2", program, with("1"));
    ASSERT_EQ(n1_->Wait(seconds(60)), expected_exit) << n1_->err_text();
    ASSERT_EQ(n0_->Wait(seconds(60)), expected_exit) << n0_->err_text();
  }
  // The lines of the console's root-cause block (those indented under its heading).
  static std::vector<std::string> RootCauseBlock(const std::string& console) {
    std::istringstream in(console);
    std::vector<std::string> block;
    size_t indent = std::string::npos;
    for (std::string l; std::getline(in, l);) {
      if (indent == std::string::npos) {
        const size_t at = l.find(launcher::kRootCauseHeading);
        if (at != std::string::npos) indent = at;
      } else if (l.size() > indent + 1 && l.find_first_not_of(' ') > indent) {
        block.push_back(l);
      } else {
        break;
      }
    }
    return block;
  }
  // "  rank      : 3" -> "3".
  static std::string Field(const std::vector<std::string>& block, const std::string& name) {
    const std::regex re("\\s*" + name + " +: (.*)");
    std::smatch m;
    for (const auto& l : block)
      if (std::regex_match(l, m, re)) return m[1];
    return "";
  }

  // Both consoles' blocks, node 0's summary and diagnosis in `run` name rank 3 on node 1.
  void ExpectRankThreeOfNodeOne(const fs::path& run, const nlohmann::json& attempt_error) {
    for (auto* l : {n0_.get(), n1_.get()}) {
      const auto block = RootCauseBlock(l->err_text());
      ASSERT_FALSE(block.empty()) << l->err_text();
      // "3" (node 0's block) or "3 (local_rank: 1)" (node 1's).
      const std::string rank = Field(block, "rank");
      EXPECT_EQ(rank.substr(0, rank.find(' ')), "3") << l->err_text();
      EXPECT_TRUE(Has(Field(block, "host"), "(node 1)")) << l->err_text();
    }
    EXPECT_TRUE(Has(attempt_error.get<std::string>(), "node 1 (")) << attempt_error;
    EXPECT_TRUE(Has(attempt_error.get<std::string>(), "rank 3 failed")) << attempt_error;
    auto diagnosis = Json(run / "diagnosis.json");
    EXPECT_EQ(diagnosis["culprit_ranks"], nlohmann::json::array({3})) << diagnosis.dump(2);
    EXPECT_TRUE(Has(diagnosis["headline"].get<std::string>(), "rank 3")) << diagnosis["headline"];
    for (const auto& r : diagnosis["ranks"]) {
      EXPECT_EQ(r["culprit"].get<bool>(), r["rank"] == 3) << r.dump();
    }
    const auto& details = diagnosis["details"];
    EXPECT_NE(std::find(details.begin(), details.end(), "  rank      : 3"), details.end())
        << details.dump(2);
  }

  std::unique_ptr<Launched> n0_, n1_;
};

TEST_F(CulpritTest, ASigkilledRankOfNodeOneIsTheRootCauseOnBothNodes) {
  Run({"/bin/sh", "-c", Script("kill -KILL $$")}, {}, 1);
  const fs::path run = RunDir("n0");
  auto summary = Json(run / "summary.json");
  ExpectRankThreeOfNodeOne(run, summary["error"]);
  EXPECT_TRUE(Has(summary["error"].get<std::string>(), "signal SIGKILL")) << summary["error"];
  // Node 1's summary holds its own ranks: the one torn down is "killed", not failed.
  auto own = Json(RunDir("n1") / "summary.node1.json");
  EXPECT_TRUE(Has(own["error"].get<std::string>(), "rank 3 failed")) << own["error"];
  for (const auto& r : summary["ranks"]) {
    EXPECT_EQ(r["status"], r["rank"] == 3 ? "failed" : "killed") << r.dump();
  }
}

TEST_F(CulpritTest, ARankOfNodeOneThatExitsOneIsTheRootCauseOnBothNodes) {
  Run({"/bin/sh", "-c", Script("exit 1")}, {}, 1);
  const fs::path run = RunDir("n0");
  auto summary = Json(run / "summary.json");
  ExpectRankThreeOfNodeOne(run, summary["error"]);
  EXPECT_TRUE(Has(summary["error"].get<std::string>(), "exit code 1")) << summary["error"];
  // Its last stderr lines reached node 0's block too.
  EXPECT_TRUE(Has(n0_->err_text(), "    dying")) << n0_->err_text();
}

TEST_F(CulpritTest, NodeZerosRanksFailingOfItAfterwardsAreNotTheRootCause) {
  Run(PeerGone("exec sleep 60"), {}, 1);
  const fs::path run = RunDir("n0");
  ExpectRankThreeOfNodeOne(run, Json(run / "summary.json")["error"]);
}

TEST_F(CulpritTest, NodeZerosAbortDuringNodeOnesTeardownLeavesItsFailedRankTheRootCause) {
  // Node 1's other rank outlasts SIGTERM (as one that saves a checkpoint would): node 0's abort,
  // sent once its own ranks failed, comes while node 1 still tears down after rank 3's failure.
  Run(PeerGone("trap '' TERM; exec sleep 60"), {"--grace-period", "3"}, 1);
  const fs::path run = RunDir("n0");
  ExpectRankThreeOfNodeOne(run, Json(run / "summary.json")["error"]);
}

TEST_F(CulpritTest, APythonRaiseOnNodeOneIsTheRootCauseWithItsMessage) {
  const fs::path script = dir_ / "raise.py";
  std::ofstream(script) << "import os, time\n"
                           "if os.environ['RANK'] == '3':\n"
                           "    time.sleep(0.3)\n"
                           "    raise RuntimeError('bad batch on rank three')\n"
                           "time.sleep(60)\n";
  Run({script.string()}, {"--python", "/usr/bin/python3"}, 1);
  const fs::path run = RunDir("n0");
  auto summary = Json(run / "summary.json");
  ExpectRankThreeOfNodeOne(run, summary["error"]);
  EXPECT_TRUE(Has(Json(run / "diagnosis.json").dump(), "bad batch on rank three"));
}

TEST_F(CulpritTest, WithARestartTheFirstAttemptsStoryNamesTheFailedRank) {
  Run({"/bin/sh", "-c", Script("exit 1")}, {"--max-restarts", "1"}, 0);
  const fs::path run = RunDir("n0");
  auto summary = Json(run / "summary.json");
  ASSERT_EQ(summary["attempts"].size(), 2u) << summary.dump(2);
  EXPECT_EQ(summary["attempts"][0]["next"], "restart");
  // attempt0/ holds the first attempt's diagnosis.
  ExpectRankThreeOfNodeOne(run / "attempt0", summary["attempts"][0]["error"]);
  EXPECT_TRUE(Has(n0_->err_text(), "attempt 0 (restart 0): 2 nodes, 4 ranks, node 1 ("))
      << n0_->err_text();
}

}  // namespace
}  // namespace dlaunch::testing
