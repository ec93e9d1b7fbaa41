// Elastic multi-node jobs with real launchers on loopback: node ranks in join order without
// --node-rank, MIN:MAX with a last call, restarts across nodes, a lost node (scale down) and a
// node that joins at the next attempt (scale up).
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "launchers_fixture.h"
#include "tests/chaos/chaos_util.h"

namespace dlaunch::testing {
namespace {

const char kEnv[] = "echo $RANK $GROUP_RANK $WORLD_SIZE $GROUP_WORLD_SIZE";

TEST_F(ElasticJobTest, ThreeLaunchersWithoutNodeRankTakeRanksInJoinOrder) {
  auto a = Start("a", "2:3", kEnv);
  auto b = Start("b", "2:3", kEnv);
  auto c = Start("c", "2:3", kEnv);
  for (auto* l : {a.get(), b.get(), c.get()}) ASSERT_EQ(l->Wait(seconds(60)), 0) << l->err_text();
  const fs::path run = NodeZeroRunDir({"a", "b", "c"});
  ASSERT_FALSE(run.empty());
  std::set<std::string> groups;
  for (int r = 0; r < 6; ++r) {
    auto lines = Lines(run / ("rank" + std::to_string(r)) / "stdout.log");
    ASSERT_EQ(lines.size(), 1u) << r;
    std::istringstream in(lines[0]);
    std::string rank, group, world, nodes;
    in >> rank >> group >> world >> nodes;
    EXPECT_EQ(rank, std::to_string(r));
    EXPECT_EQ(group, std::to_string(r / 2));
    EXPECT_EQ(world, "6");
    EXPECT_EQ(nodes, "3");
    groups.insert(group);
  }
  EXPECT_EQ(groups.size(), 3u);  // nobody else became node 0
  EXPECT_EQ(Json(run / "summary.json")["nodes"].size(), 3u);
}

// 16 launchers of 8 ranks each in one shared run directory (a shared file system, as under
// Slurm): node 0 answers every node's last join and goes. A joining node's last push then finds
// node 0 gone, and must fail at once instead of waiting out its 5 s deadline for a coordinator
// that will not come back; every launcher ends within moments of node 0.
TEST_F(ElasticJobTest, JoiningLaunchersEndWithNodeZero) {
  nproc_ = "8";
  std::vector<std::unique_ptr<Launched>> launchers;
  for (int i = 0; i < 16; ++i) launchers.push_back(Start("shared", "16", "true"));
  std::vector<std::optional<std::chrono::steady_clock::time_point>> ended(launchers.size());
  const auto deadline = std::chrono::steady_clock::now() + seconds(90);
  size_t left = launchers.size();
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < launchers.size(); ++i) {
      if (ended[i]) continue;
      const int code = launchers[i]->Wait(std::chrono::milliseconds(10));
      if (code == -1) continue;
      EXPECT_EQ(code, 0) << launchers[i]->err_text();
      ended[i] = std::chrono::steady_clock::now();
      --left;
    }
  }
  ASSERT_EQ(left, 0u);
  std::optional<size_t> zero;
  for (size_t i = 0; i < launchers.size(); ++i)
    if (Has(launchers[i]->err_text(), "dlaunch: node 0, coordinator on")) zero = i;
  ASSERT_TRUE(zero.has_value());
  for (size_t i = 0; i < launchers.size(); ++i) {
    const auto after_zero = *ended[i] - *ended[*zero];
    EXPECT_LT(after_zero, seconds(3))
        << "launcher " << i << " ended "
        << std::chrono::duration_cast<std::chrono::milliseconds>(after_zero).count()
        << " ms after node 0\n"
        << launchers[i]->err_text();
  }
}

TEST_F(ElasticJobTest, MinNodesStartAfterTheLastCall) {
  const std::vector<std::string> conf = {"--rdzv-conf", "last_call_timeout=1"};
  auto a = Start("a", "2:3", kEnv, conf);
  auto b = Start("b", "2:3", kEnv, conf);
  ASSERT_EQ(a->Wait(seconds(60)), 0) << a->err_text();
  ASSERT_EQ(b->Wait(seconds(60)), 0) << b->err_text();
  const fs::path run = NodeZeroRunDir({"a", "b"});
  ASSERT_FALSE(run.empty());
  EXPECT_EQ(Lines(run / "rank3" / "stdout.log"), std::vector<std::string>{"3 1 4 2"});
  EXPECT_FALSE(fs::exists(run / "rank4"));
}

TEST_F(ElasticJobTest, TooFewNodesEndTheRendezvousNamingWhatIsMissing) {
  auto a = Start("a", "2:3", kEnv, {"--rdzv-conf", "join_timeout=1"});
  EXPECT_EQ(a->Wait(seconds(30)), 1);
  EXPECT_TRUE(Has(a->err_text(), "1 of at least 2 nodes joined; node 1 never joined"))
      << a->err_text();
}

TEST_F(ElasticJobTest, ARankKilledOnNodeOneRestartsTheWholeJobOnce) {
  // Attempt 0: rank 3 (node 1) dies of SIGKILL once every rank started; the others wait.
  const std::string script =
      "echo restart $TORCHELASTIC_RESTART_COUNT; "
      "if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then "
      "  if [ $RANK = 3 ]; then sleep 0.3; kill -KILL $$; fi; exec sleep 60; fi";
  auto n0 = Start("n0", "2", script, {"--node-rank", "0", "--max-restarts", "1"});
  auto n1 = Start("n1", "2", script, {"--node-rank", "1", "--max-restarts", "1"});
  ASSERT_EQ(n1->Wait(seconds(60)), 0) << n1->err_text();
  ASSERT_EQ(n0->Wait(seconds(60)), 0) << n0->err_text();
  EXPECT_TRUE(Has(n0->err_text(), "rank 3 failed: signal SIGKILL")) << n0->err_text();
  EXPECT_TRUE(Has(n0->err_text(), "restarting all ranks (restart 1 of 1)")) << n0->err_text();
  const fs::path run = RunDir("n0");
  for (int r = 0; r < 4; ++r) {
    // Each attempt in its own folder: no log holds two attempts.
    const std::string rank = "rank" + std::to_string(r);
    EXPECT_EQ(Lines(run / rank / "stdout.log"), std::vector<std::string>{"restart 1"}) << r;
    EXPECT_EQ(Lines(run / "attempt0" / rank / "stdout.log"), std::vector<std::string>{"restart 0"})
        << r;
  }
  auto summary = Json(run / "summary.json");
  EXPECT_EQ(summary["exit_code"], 0);
  EXPECT_EQ(summary["restarts"], 1);
  ASSERT_EQ(summary["attempts"].size(), 2u);
  EXPECT_EQ(summary["attempts"][0]["next"], "restart");
  EXPECT_EQ(summary["attempts"][0]["folder"], "attempt0");
  EXPECT_TRUE(Has(summary["attempts"][0]["error"].get<std::string>(), "rank 3 failed"));
  EXPECT_EQ(summary["attempts"][1]["exit_code"], 0);
  EXPECT_TRUE(Has(n0->err_text(), "attempt 1 (restart 1): 2 nodes, 4 ranks, ok")) << n0->err_text();
}

TEST_F(ElasticJobTest, ASigkilledNodeLeavesTheJobToTheRest) {
  // While both nodes run (world 4) every rank waits; with node 0 alone (world 2) they finish.
  const std::string script =
      "echo world $WORLD_SIZE; if [ $WORLD_SIZE = 4 ]; then echo ready; exec sleep 60; fi";
  auto n0 = Start("n0", "1:2", script);
  // The first to listen on the endpoint is node 0.
  ASSERT_TRUE(n0->WaitFor(
      [&](const std::vector<std::string>&) { return Has(n0->err_text(), "coordinator on"); },
      seconds(30)))
      << n0->err_text();
  auto n1 = Start("n1", "1:2", script);
  ASSERT_TRUE(n0->WaitFor(Count("ready", 2), seconds(60))) << n0->err_text();
  ASSERT_TRUE(n1->WaitFor(Count("ready", 2), seconds(60))) << n1->err_text();
  ASSERT_EQ(::kill(n1->pid(), SIGKILL), 0);
  EXPECT_EQ(n0->Wait(seconds(60)), 0) << n0->err_text();
  EXPECT_TRUE(Has(n0->err_text(), "node 1 (")) << n0->err_text();
  EXPECT_TRUE(Has(n0->err_text(), "1 node lost; 1 node left")) << n0->err_text();
  const fs::path run = RunDir("n0");
  EXPECT_EQ(Lines(run / "rank1" / "stdout.log"), std::vector<std::string>{"world 2"});
  EXPECT_FALSE(fs::exists(run / "rank2"));  // rank 2 was node 1's, in attempt 0
  auto summary = Json(run / "summary.json");
  EXPECT_EQ(summary["exit_code"], 0);
  EXPECT_EQ(summary["restarts"], 0);  // a membership change does not use up --max-restarts
  ASSERT_EQ(summary["attempts"].size(), 2u);
  EXPECT_EQ(summary["attempts"][0]["next"], "rejoin");
  EXPECT_EQ(summary["attempts"][1]["nnodes"], 1);
  EXPECT_EQ(summary["attempts"][1]["world_size"], 2);
}

// #30 part 8: built-in train on 2 nodes of 2 ranks, checkpointing; node 1's launcher is killed
// once a checkpoint exists, and node 0 goes on alone with 2 ranks from that checkpoint, the
// sampler re-sharded, saying what changed, to the end of the data.
TEST_F(ElasticJobTest, AfterAScaleDownTrainResumesFromItsCheckpointWithFewerRanks) {
  const fs::path ckpt = dir_ / "ckpt";
  const std::vector<std::string> train = {"train",
                                          "--data",
                                          "synthetic",
                                          "--model",
                                          "mlp",
                                          "--no-preflight",
                                          "--steps",
                                          "600",
                                          "--checkpoint-dir",
                                          ckpt.string(),
                                          "--checkpoint-every",
                                          "50"};
  const std::vector<std::string> extra = {"--rdzv-conf", "last_call_timeout=1"};
  auto n0 = StartProgram("n0", "1:2", train, extra);
  ASSERT_TRUE(n0->WaitFor(
      [&](const std::vector<std::string>&) { return Has(n0->err_text(), "coordinator on"); },
      seconds(30)))
      << n0->err_text();
  auto n1 = StartProgram("n1", "1:2", train, extra);
  // Rank 0 writes the checkpoint atomically (a rename): once it is there it is whole.
  const auto deadline = std::chrono::steady_clock::now() + seconds(90);
  while (!fs::exists(ckpt / "checkpoint.pt") && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the next checkpoint
  }
  ASSERT_TRUE(fs::exists(ckpt / "checkpoint.pt")) << n0->err_text() << n1->err_text();
  ASSERT_EQ(::kill(n1->pid(), SIGKILL), 0);
  ASSERT_EQ(n0->Wait(seconds(120)), 0) << n0->err_text();
  std::string out;
  for (const auto& l : n0->out_lines) out += l + "\n";
  EXPECT_TRUE(Has(n0->err_text(), "1 node lost; 1 node left")) << n0->err_text();
  EXPECT_TRUE(Has(out, "[train] resumed step ")) << out;
  EXPECT_TRUE(Has(out,
                  " with 2 ranks instead of 4; the per-rank batch is kept, so the global "
                  "batch is now 64 (was 128)"))
      << out;
  EXPECT_FALSE(Has(out, "refus")) << out;
  const auto summary = Json(RunDir("n0") / "summary.json");
  EXPECT_EQ(summary["exit_code"], 0);
  ASSERT_EQ(summary["attempts"].size(), 2u) << summary.dump(2);
  EXPECT_EQ(summary["attempts"][1]["world_size"], 2);
  // A row of `make chaos` (RELIABILITY.md), which repeats this test.
  chaos::Record({{"fault", "node SIGKILLed while train checkpoints: resumed with fewer ranks"},
                 {"right", !HasFailure()}});
}

TEST_F(ElasticJobTest, ALostNodeZeroEndsTheOtherNodesSoon) {
  const std::string script = "echo ready; exec sleep 60";
  auto n0 = Start("n0", "1:2", script, {"--node-rank", "0"});
  auto n1 = Start("n1", "1:2", script, {"--node-rank", "1"});
  ASSERT_TRUE(n0->WaitFor(Count("ready", 2), seconds(60))) << n0->err_text();
  ASSERT_TRUE(n1->WaitFor(Count("ready", 2), seconds(60))) << n1->err_text();
  ASSERT_EQ(::kill(n0->pid(), SIGKILL), 0);
  // Node 0 hosts the coordinator: the job cannot go on, and node 1 does not wait for it.
  EXPECT_EQ(n1->Wait(seconds(20)), 1) << n1->err_text();
  EXPECT_TRUE(Has(n1->err_text(), "lost node 0's coordinator")) << n1->err_text();
}

TEST_F(ElasticJobTest, ANodeThatComesLateJoinsAtTheNextAttempt) {
  const fs::path go = dir_ / "go";
  // Attempt 0 (node 0 alone): rank 1 fails once the late node waits; attempt 1 has both.
  const std::string script =
      "echo world $WORLD_SIZE; if [ $WORLD_SIZE = 2 ]; then "
      "  if [ $RANK = 1 ]; then while [ ! -e " +
      go.string() + " ]; do sleep 0.05; done; exit 7; fi; exec sleep 60; fi";
  const std::vector<std::string> flags = {"--max-restarts", "1", "--rdzv-conf",
                                          "last_call_timeout=0.2"};
  auto n0 = Start("n0", "1:2", script, flags);
  ASSERT_TRUE(n0->WaitFor(Count("world 2", 2), seconds(60))) << n0->err_text();
  auto late = Start("late", "1:2", script, flags);
  // Node 0 says so once the late node waits at the coordinator.
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (!Has(n0->err_text(), "waits to join the next attempt") &&
         std::chrono::steady_clock::now() < deadline) {
    n0->WaitFor([](const std::vector<std::string>&) { return false; },
                std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(Has(n0->err_text(), "waits to join the next attempt")) << n0->err_text();
  std::ofstream(go) << "go\n";
  ASSERT_EQ(late->Wait(seconds(60)), 0) << late->err_text();
  ASSERT_EQ(n0->Wait(seconds(60)), 0) << n0->err_text();
  const fs::path run = RunDir("n0");
  EXPECT_EQ(Lines(run / "rank3" / "stdout.log"), std::vector<std::string>{"world 4"});
  auto summary = Json(run / "summary.json");
  ASSERT_EQ(summary["attempts"].size(), 2u);
  EXPECT_EQ(summary["attempts"][0]["nnodes"], 1);
  EXPECT_EQ(summary["attempts"][1]["nnodes"], 2);
}

TEST_F(ElasticJobTest, AFixedRunIdNeverMixesANewRunWithAnOldOne) {
  for (const char* word : {"first", "second"}) {
    auto a = Start("a", "1", std::string("echo ") + word);
    ASSERT_EQ(a->Wait(seconds(30)), 0) << a->err_text();
  }
  const fs::path run = RunDir("a");
  EXPECT_EQ(Lines(run / "rank0" / "stdout.log"), std::vector<std::string>{"second"});
  EXPECT_EQ(Lines(run / "attempt0" / "rank0" / "stdout.log"), std::vector<std::string>{"first"});
  EXPECT_TRUE(fs::exists(run / "attempt0" / "summary.json"));
}

}  // namespace
}  // namespace dlaunch::testing
