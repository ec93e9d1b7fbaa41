// Diagnosis across nodes: real launchers on loopback (2 and 4 of them, and two in network
// namespaces with host names of their own), real Python ranks with the agent and real native
// gloo ranks. Node 0 judges a fault on another node from evidence that node pushed whole and
// current (rewritten flight tails, heartbeats, Python stacks, stacks taken by that node's agent),
// and never reports a mismatch that did not happen.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "launchers_fixture.h"
#include "tests/common/tiny_disk.h"
#include "tests/common/veth_hosts.h"

namespace dlaunch::testing {
namespace {

constexpr char kPython[] = "/usr/bin/python3";

class RemoteEvidenceTest : public ElasticJobTest {
 protected:
  bool HavePythonTorch() {
    return ::access(kPython, X_OK) == 0 &&
           std::system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") == 0;
  }
  // remote_faults.py MODE under --python, one launcher per node.
  static std::vector<std::string> Python(const std::string& mode) {
    return {std::string(DLAUNCH_MN_SCRIPTS) + "/remote_faults.py", mode};
  }
  // Starts `nodes` launchers n0.. with fixed node ranks, then waits for each; returns the exits.
  std::vector<int> RunNodes(int nodes, const std::vector<std::string>& program,
                            std::vector<std::string> extra, std::vector<std::string> env = {}) {
    extra.insert(extra.end(), {"--hang-timeout", "3", "--grace-period", "2"});
    for (int n = 0; n < nodes; ++n) {
      std::vector<std::string> e = {"--node-rank", std::to_string(n)};
      e.insert(e.end(), extra.begin(), extra.end());
      launchers_.push_back(
          StartProgram("n" + std::to_string(n), std::to_string(nodes), program, e, env));
    }
    std::vector<int> exits;
    for (auto& l : launchers_) exits.push_back(l->Wait(seconds(90)));
    return exits;
  }
  fs::path Zero() { return RunDir("n0"); }
  nlohmann::json Diagnosis() { return Json(Zero() / "diagnosis.json"); }
  std::string Console() { return launchers_.empty() ? "" : launchers_[0]->err_text(); }
  static std::string Text(const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // The highest seq in a flight tail (JSON lines, blank slots), -1 for none.
  static int64_t MaxSeq(const fs::path& tail) {
    std::ifstream in(tail);
    int64_t max = -1;
    for (std::string l; std::getline(in, l);) {
      const nlohmann::json j = nlohmann::json::parse(l, nullptr, false);
      if (j.is_object() && j.contains("seq")) max = std::max(max, j["seq"].get<int64_t>());
    }
    return max;
  }
  // No rank is blamed for a collective it did not call differently.
  void ExpectNoMismatch(const nlohmann::json& d) {
    EXPECT_NE(d.value("kind", ""), "mismatch") << d.dump(2);
    EXPECT_FALSE(Has(d.value("headline", ""), "MISMATCH")) << d.dump(2);
    EXPECT_FALSE(Has(Console(), "MISMATCH")) << Console();
  }
  // A hang named on `culprit`, a rank of another node, with its Python stack in node 0's copy.
  void ExpectPythonHangOn(int culprit) {
    const nlohmann::json d = Diagnosis();
    ASSERT_TRUE(d.is_object()) << Console();
    EXPECT_EQ(d["kind"], "hang") << d.dump(2);
    EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({culprit})) << d.dump(2);
    EXPECT_EQ(d["seq"], 3) << d.dump(2);
    ExpectNoMismatch(d);
    const fs::path rank_dir = Zero() / ("rank" + std::to_string(culprit));
    EXPECT_TRUE(Has(Text(rank_dir / "py_stacks.txt"), "wait_for_data"))
        << Text(rank_dir / "py_stacks.txt");
    EXPECT_TRUE(Has(d["ranks"][culprit].value("stack_top", ""), "wait_for_data"))
        << d["ranks"][culprit].dump(2);
  }

  std::vector<std::unique_ptr<Launched>> launchers_;
};

TEST_F(RemoteEvidenceTest, APythonHangOnNodeOneIsNamedWithItsStack) {
  if (!HavePythonTorch()) GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  nproc_ = "1";
  const auto exits = RunNodes(2, Python("sleep"), {"--python", kPython});
  EXPECT_EQ(exits[0], 3) << Console();
  ExpectPythonHangOn(1);
  // The flight tail node 1's agent rewrote in place is node 0's copy, entry for entry.
  EXPECT_EQ(Text(Zero() / "rank1" / "flight_tail.jsonl"),
            Text(RunDir("n1") / "rank1" / "flight_tail.jsonl"));
}

// `dlaunch dump` on node 0's run directory while a two-node Python job runs: node 1's rank is
// dumped too (its Python stacks through its agent, its native stacks by node 1's launcher), and
// the job still ends well.
TEST_F(RemoteEvidenceTest, DumpTakesTheOtherNodesRanksAndTheJobGoesOn) {
  if (!HavePythonTorch()) GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  nproc_ = "1";
  for (int n = 0; n < 2; ++n) {
    launchers_.push_back(StartProgram(
        "n" + std::to_string(n), "2", Python("ok"),
        {"--node-rank", std::to_string(n), "--python", kPython, "--hang-timeout", "60"},
        {"STEP_S=2"}));
  }
  // Both ranks are past torch's import and the group's set-up once node 0 holds heartbeats
  // (node 1's pushed) that have completed a collective: before that the main thread may hold
  // the GIL in torch's import, and no agent can answer a dump.
  auto past_first_collective = [&](int rank) {
    const nlohmann::json beat = Json(Zero() / ("rank" + std::to_string(rank)) / "heartbeat.json");
    return beat.is_object() && beat.value("last_completed_seq", -1) >= 0;
  };
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (!(past_first_collective(0) && past_first_collective(1)) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(past_first_collective(0) && past_first_collective(1)) << Console();
  Launched dump({DLAUNCH_BIN, "dump", Zero().string()});
  ASSERT_EQ(dump.Wait(seconds(40)), 0) << dump.err_text() << Console();
  fs::path folder;
  for (const auto& e : fs::directory_iterator(Zero() / "dumps")) folder = e.path();
  const nlohmann::json m = Json(folder / "dump.json");
  ASSERT_TRUE(m.is_object()) << folder;
  EXPECT_EQ(m["ranks"].size(), 2u) << m.dump(2);
  EXPECT_TRUE(Has(Text(folder / "rank1" / "stacks.txt"), "#0 "))
      << Text(folder / "rank1" / "stacks.txt");
  EXPECT_TRUE(Has(Text(folder / "rank1" / "py_stacks.txt"), "remote_faults.py")) << m.dump(2);
  EXPECT_TRUE(Has(Text(folder / "rank0" / "py_stacks.txt"), "remote_faults.py")) << m.dump(2);
  // The dump's stacks stay in the dump: node 0's rank folder keeps a diagnosis' only.
  EXPECT_FALSE(fs::exists(Zero() / "rank1" / "stacks.txt"));
  for (auto& l : launchers_) EXPECT_EQ(l->Wait(seconds(90)), 0) << l->err_text();
}

TEST_F(RemoteEvidenceTest, FourNodesNameTheHungRankOfTheLastNode) {
  if (!HavePythonTorch()) GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  nproc_ = "1";
  const auto exits = RunNodes(4, Python("sleep"), {"--python", kPython});
  EXPECT_EQ(exits[0], 3) << Console();
  ExpectPythonHangOn(3);
}

// #30: node 1's log disk is full from the start, so its rank's agent can write no heartbeat.json
// (nor flight tail, nor stacks): it sends its heartbeats through its launcher's pipe, and node
// 1's agent passes them on to node 0 in its node stream. Node 0 finds the hang on node 1 and says
// why node 1's files are silent.
TEST_F(RemoteEvidenceTest, APythonHangOnANodeWhoseDiskIsFullIsFound) {
  if (!HavePythonTorch()) GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  TinyDisk disk;
  if (const std::string why = disk.Mount(LogDir("n1"), "4m"); !why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(disk.Fill());
  nproc_ = "1";
  const auto exits = RunNodes(2, Python("sleep"), {"--python", kPython});
  EXPECT_EQ(exits[0], 3) << Console();
  const nlohmann::json d = Diagnosis();
  ASSERT_TRUE(d.is_object()) << Console();
  EXPECT_EQ(d["kind"], "hang") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
  ExpectNoMismatch(d);
  EXPECT_TRUE(Has(Console(),
                  "rank 1: its heartbeat file could not be written (heartbeat.json: "
                  "[Errno 28] No space left on device)"))
      << Console();
}

TEST_F(RemoteEvidenceTest, APythonSizeMismatchAcrossNodesNamesTheSender) {
  if (!HavePythonTorch()) GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  nproc_ = "1";
  RunNodes(2, Python("size"), {"--python", kPython});
  const nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["kind"], "mismatch") << d.dump(2) << Console();
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
}

TEST_F(RemoteEvidenceTest, ARankDyingOnNodeOneWhileNodeZeroWaitsIsTheRootCause) {
  if (!HavePythonTorch()) GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  const auto exits = RunNodes(2, Python("raise"), {"--python", kPython}, {"FAULT_RANK=2"});
  EXPECT_EQ(exits[0], 1) << Console();
  const nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({2})) << d.dump(2) << Console();
  EXPECT_TRUE(Has(d.value("headline", ""), "rank 2")) << d.dump(2);
  ExpectNoMismatch(d);
}

TEST_F(RemoteEvidenceTest, AKilledNodeIsNamedLostAndNoRankIsBlamedForAMismatch) {
  if (!HavePythonTorch()) GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  nproc_ = "1";
  // Node 1's rank sleeps at step 3, node 0's waits in the all_reduce; then node 1 is killed
  // before the hang timeout runs out.
  for (int n = 0; n < 2; ++n) {
    launchers_.push_back(StartProgram(
        "n" + std::to_string(n), "2", Python("sleep"),
        {"--node-rank", std::to_string(n), "--python", kPython, "--hang-timeout", "30"}));
  }
  // Node 1's agent has pushed rank 1's heartbeat at step 3 (its flight tail holds seq 2).
  const fs::path tail = Zero() / "rank1" / "flight_tail.jsonl";
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (MaxSeq(tail) < 2 && std::chrono::steady_clock::now() < deadline) {
    launchers_[0]->WaitFor([](const auto&) { return false; }, std::chrono::milliseconds(100));
  }
  ASSERT_GE(MaxSeq(tail), 2) << Text(tail) << Console();
  ASSERT_EQ(::kill(launchers_[1]->pid(), SIGKILL), 0);
  EXPECT_EQ(launchers_[0]->Wait(seconds(60)), 1) << Console();
  EXPECT_TRUE(Has(Console(), "node 1 (")) << Console();
  EXPECT_TRUE(Has(Console(), "lost")) << Console();
  const nlohmann::json d = Diagnosis();
  ASSERT_TRUE(d.is_object()) << Console();
  ExpectNoMismatch(d);
  for (int r : d["culprit_ranks"]) EXPECT_EQ(r, 1) << d.dump(2);
}

TEST_F(RemoteEvidenceTest, AfterAnElasticScaleDownAHangOnTheNewNodeOneIsNamed) {
  if (!HavePythonTorch()) GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  nproc_ = "1";
  // Three nodes step slowly until node 2 is killed; the job goes on with two, and in that world
  // rank 1 (node 1) hangs.
  for (int n = 0; n < 3; ++n) {
    launchers_.push_back(
        StartProgram("n" + std::to_string(n), "2:3", Python("sleep"),
                     {"--node-rank", std::to_string(n), "--python", kPython, "--max-restarts", "2",
                      "--hang-timeout", "3"},
                     {"FAULT_WORLD=2", "FAULT_RANK=1", "STEPS=600", "STEP_S=0.1"}));
  }
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (!fs::exists(RunDir("n2") / "rank2" / "heartbeat.json") &&
         std::chrono::steady_clock::now() < deadline) {
    launchers_[2]->WaitFor([](const auto&) { return false; }, std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(fs::exists(RunDir("n2") / "rank2" / "heartbeat.json")) << Console();
  ASSERT_EQ(::kill(launchers_[2]->pid(), SIGKILL), 0);
  EXPECT_EQ(launchers_[0]->Wait(seconds(90)), 3) << Console();
  EXPECT_TRUE(Has(Console(), "attempt 1")) << Console();
  ExpectPythonHangOn(1);
}

TEST_F(RemoteEvidenceTest, NativeRanksHangAndMismatchAcrossNodes) {
  for (const std::string fault : {"never_entered", "count"}) {
    launchers_.clear();
    const std::string name = "native-" + fault;
    const auto exits = RunNodes(2, {FAULT_RANK_BIN}, {},
                                {"DIAG_FAULT=" + fault, "DIAG_FAULT_RANK=3", "DIAG_FAULT_SEQ=3"});
    const nlohmann::json d = Diagnosis();
    ASSERT_TRUE(d.is_object()) << fault << Console();
    EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({3})) << fault << d.dump(2);
    EXPECT_EQ(d["kind"], fault == "count" ? "mismatch" : "hang") << fault << d.dump(2);
    if (fault != "count") ExpectNoMismatch(d);
    EXPECT_NE(exits[0], 0);
    fs::remove_all(dir_ / "n0");
    fs::remove_all(dir_ / "n1");
  }
}

#ifdef SCALE_RANK_BIN
// The scale harness at a small size: 4 launchers of 5 scale_rank ranks; rank 13 (node 2) never
// enters collective 3. The console groups the 19 waiting ranks: node 0's own (with their process
// state) and the other nodes'.
TEST_F(RemoteEvidenceTest, TheScaleHarnessRankHungOnNodeTwoIsNamedAndTheOthersAreOneLine) {
  nproc_ = "5";
  const auto exits = RunNodes(4, {SCALE_RANK_BIN}, {},
                              {"SCALE_HANG_RANK=13", "SCALE_HANG_STEP=3", "SCALE_STEP_MS=200"});
  EXPECT_EQ(exits[0], 3) << Console();
  const nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["kind"], "hang") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({13})) << d.dump(2);
  EXPECT_EQ(d["ranks"].size(), 20u);
  EXPECT_TRUE(Has(Console(), "  rank 13 [culprit]: never entered #3")) << Console();
  EXPECT_TRUE(Has(Console(), "  ranks 0-4: waiting in #3 for ")) << Console();
  EXPECT_TRUE(Has(Console(), "  ranks 5-12,14-19: waiting in #3 for ")) << Console();
}
#endif

// Two hosts with addresses and host names of their own.
TEST_F(RemoteEvidenceTest, APythonHangAcrossNetworkNamespacesIsNamedWithItsStack) {
  if (!HavePythonTorch()) GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  VethHosts hosts("dre", 11);
  if (!hosts.wired) GTEST_SKIP() << "cannot wire a veth pair between network namespaces here";
  endpoint_ = hosts.Address(0) + ":29555";
  nproc_ = "1";
  for (int n = 0; n < 2; ++n) {
    prefix_ = hosts.Prefix(n, "host-" + std::to_string(n));
    launchers_.push_back(StartProgram("n" + std::to_string(n), "2", Python("sleep"),
                                      {"--node-rank", std::to_string(n), "--python", kPython,
                                       "--hang-timeout", "3", "--master-addr", hosts.Address(0)}));
  }
  std::vector<int> exits;
  for (auto& l : launchers_) exits.push_back(l->Wait(seconds(90)));
  EXPECT_EQ(exits[0], 3) << Console();
  ExpectPythonHangOn(1);
  EXPECT_TRUE(Has(Json(Zero() / "summary.json").dump(), "host-1")) << Console();
}

}  // namespace
}  // namespace dlaunch::testing
