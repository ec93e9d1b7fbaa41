// The Python rank agent in real torch scripts under the launcher: flight recorder, heartbeats,
// hang detection from progress, OOM reports, the dlaunch API.
#include <gmock/gmock.h>
#include <signal.h>

#include <sstream>
#include <thread>

#include "python_test_util.h"

namespace dlaunch::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

class PythonAgentTest : public PythonJobTest {
 protected:
  // collectives.py MODE on `nproc` ranks; rank 1 misbehaves at step 3.
  int RunCollectives(const std::string& mode, int nproc, const std::string& hang_timeout = "3",
                     std::vector<std::string> env = {}) {
    std::vector<std::string> args = {
        "--nproc", std::to_string(nproc), "--quiet",   "--grace-period",
        "3",       "--hang-timeout",      hang_timeout};
    args.insert(args.end(), {Script("collectives.py"), mode});
    Launched l(Cmd(args), env);
    const int code = l.Wait(seconds(100));
    err_ = l.err_text();
    return code;
  }
  // The launcher's first root-cause block (printed as the first rank exits) and summary.json's
  // error name `rank` and `what`.
  void ExpectRootCauseNames(int rank, const std::string& what) {
    const size_t block = err_.find("Root Cause (first observed failure):");
    ASSERT_NE(block, std::string::npos) << err_;
    const size_t end = err_.find("\n  logs", block);
    const std::string text = err_.substr(block, end == std::string::npos ? end : end - block);
    EXPECT_THAT(text, HasSubstr("  rank      : " + std::to_string(rank) + " (local_rank: "))
        << text;
    EXPECT_THAT(text, HasSubstr("  error     : " + what)) << text;
    const nlohmann::json summary = ReadJson(RunDir() / "summary.json");
    ASSERT_TRUE(summary.is_object()) << err_;
    const std::string error = summary.value("error", "");
    EXPECT_EQ(error.rfind("rank " + std::to_string(rank) + " failed", 0), 0u) << error;
    EXPECT_THAT(error, HasSubstr(what)) << error;
  }
  std::string err_;
};

TEST_F(PythonAgentTest, HealthyJobWritesFlightHeartbeatAndTelemetry) {
  ASSERT_EQ(RunCollectives("ok", 2), 0) << err_;
  nlohmann::json flight = ReadJson(RankDir(1) / "flight.json");
  ASSERT_TRUE(flight.is_object()) << err_;
  EXPECT_EQ(flight["schema"], "dlaunch.flight/1");
  EXPECT_EQ(flight["reason"], "exit");
  EXPECT_EQ(flight["backend"], "gloo");
  ASSERT_EQ(flight["entries"].size(), 7u);  // 6 all-reduces and a barrier
  const nlohmann::json& first = flight["entries"][0];
  EXPECT_EQ(first["op"], "allreduce");
  EXPECT_EQ(first["dtype"], "float");
  EXPECT_EQ(first["count"], 1 << 16);
  EXPECT_EQ(first["pg"], "0");
  EXPECT_EQ(first["state"], "completed");
  EXPECT_THAT(first["call_site"].get<std::string>(), HasSubstr("collectives.py:"));
  EXPECT_EQ(flight["entries"][6]["op"], "barrier");
  nlohmann::json beat = ReadJson(RankDir(1) / "heartbeat.json");
  EXPECT_EQ(beat["schema"], "dlaunch.heartbeat/1");
  EXPECT_EQ(beat["last_completed_seq"], 6);
  EXPECT_GT(beat["rss_bytes"].get<int64_t>(), 0);
  const std::string events = ReadText(RankDir(0) / "events.jsonl");
  EXPECT_THAT(events, HasSubstr("\"kind\":\"telemetry\""));
  // Every line carries its schema, as docs/run-directory.md says of every line.
  std::istringstream lines(events);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n)
    EXPECT_EQ(nlohmann::json::parse(line).value("schema", ""), "dlaunch.events/1") << line;
  EXPECT_GT(n, 0);
  // No temporary file of the agent's atomic writes is left behind, and every file the agent
  // wrote is private (0600 under the default --run-dir-mode 0700), as the launcher's are.
  for (const auto& entry : std::filesystem::directory_iterator(RankDir(1))) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
    const auto perms = entry.status().permissions();
    EXPECT_EQ(perms & (std::filesystem::perms::group_all | std::filesystem::perms::others_all),
              std::filesystem::perms::none)
        << entry.path();
  }
}

// Rank 1 all-reduces 1024 floats more at #3; Gloo aborts a healthy rank that received them
// (SIGABRT, before its next flight.json). Its flight_tail.jsonl keeps #3, so the sizes compare
// across every rank, and the sender is named at 2 ranks (a tie) as at 3 and 4.
class SizeMismatchTest : public PythonAgentTest, public ::testing::WithParamInterface<int> {};

TEST_P(SizeMismatchTest, NamesThePeerThatSentTheWrongSize) {
  const int nproc = GetParam();
  EXPECT_NE(RunCollectives("size", nproc), 0) << err_;
  nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["kind"], "mismatch") << d.dump(2);
  EXPECT_EQ(d["mismatch_type"], "SIZE_OR_SYNTAX_MISMATCH") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
  EXPECT_EQ(d["seq"], 3);
  EXPECT_THAT(d["headline"].get<std::string>(),
              HasSubstr("rank 1 called allreduce float x66560 (260 KiB) while rank"));
  // Gloo aborted rank 0 (or another receiver) first; the root cause is still the sender.
  ExpectRootCauseNames(1, "MISMATCH at collective #3 (SIZE_OR_SYNTAX_MISMATCH): rank 1 called");
  const std::string details = d["details"].dump();
  EXPECT_THAT(details, HasSubstr("aborted by Gloo: a peer sent ")) << details;
  EXPECT_THAT(details, HasSubstr("x66560 (260 KiB) at ")) << details;
  EXPECT_THAT(details, HasSubstr("collectives.py:")) << details;
  // Every rank's tail holds #3 as it started.
  for (int r = 0; r < nproc; ++r) {
    EXPECT_THAT(ReadText(RankDir(r) / "flight_tail.jsonl"), HasSubstr("\"seq\":3,")) << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, SizeMismatchTest, ::testing::Values(2, 3, 4));

// Rank 1 all-reduces 256 floats fewer at #3, at the call site where every rank used 65,536 for
// #0-#2: Gloo aborts rank 1 itself (it received more than it posted), yet rank 1 is named, at 2
// ranks (a tie its own history settles) as at 3, and no evidence line argues for another rank.
class ShortTensorTest : public PythonAgentTest, public ::testing::WithParamInterface<int> {};

TEST_P(ShortTensorTest, NamesTheRankWhoseTensorShrank) {
  EXPECT_NE(RunCollectives("short", GetParam()), 0) << err_;
  nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["mismatch_type"], "SIZE_OR_SYNTAX_MISMATCH") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
  EXPECT_THAT(d["headline"].get<std::string>(), HasSubstr("rank 1 called allreduce float x65280"))
      << d.dump(2);
  EXPECT_THAT(d["details"].dump(), ::testing::Not(HasSubstr("sender"))) << d.dump(2);
  ExpectRootCauseNames(1, "MISMATCH at collective #3 (SIZE_OR_SYNTAX_MISMATCH): rank 1 called");
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShortTensorTest, ::testing::Values(2, 3));

// float64 on rank 1: its messages are larger too, so at 2 ranks Gloo aborts rank 0 (a tie).
class DtypeMismatchTest : public PythonAgentTest, public ::testing::WithParamInterface<int> {};

TEST_P(DtypeMismatchTest, IsNamed) {
  EXPECT_NE(RunCollectives("dtype", GetParam()), 0) << err_;
  nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["mismatch_type"], "COLLECTIVE_DTYPE_MISMATCH") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
  ExpectRootCauseNames(1, "MISMATCH at collective #3 (COLLECTIVE_DTYPE_MISMATCH): rank 1 called");
}

INSTANTIATE_TEST_SUITE_P(Ranks, DtypeMismatchTest, ::testing::Values(2, 4));

TEST_F(PythonAgentTest, OpMismatchIsFoundByTheLiveMonitor) {
  EXPECT_EQ(RunCollectives("op", 3), 3) << err_;
  nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["mismatch_type"], "COLLECTIVE_TYPE_MISMATCH") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
}

TEST_F(PythonAgentTest, SleepingRankIsTheCulpritWithItsPythonStack) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(RunCollectives("sleep", 3), 3) << err_;
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(40));
  nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["kind"], "hang") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
  EXPECT_EQ(d["seq"], 3);
  EXPECT_THAT(d["trigger"].get<std::string>(), HasSubstr("rank 1 has not entered it"));
  EXPECT_THAT(ReadText(RankDir(1) / "py_stacks.txt"), HasSubstr("time.sleep(3600)"));
  // The diagnosis shows where the culprit's main thread is.
  EXPECT_THAT(d["ranks"][1]["stack_top"].get<std::string>(),
              HasSubstr("time.sleep(3600) < collectives.py:"))
      << d.dump(2);
}

TEST_F(PythonAgentTest, StoppedRankIsTheCulprit) {
  EXPECT_EQ(RunCollectives("stop", 3), 3) << err_;
  nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["kind"], "hang") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
  EXPECT_THAT(d["headline"].get<std::string>(), HasSubstr("T (stopped)")) << d.dump(2);
}

TEST_F(PythonAgentTest, SilentHealthyJobIsNotKilled) {
  // 5 s of silence between two collectives, hang timeout 2 s: no collective is in flight.
  EXPECT_EQ(RunCollectives("silent", 2, "2", {"SILENT_S=5"}), 0) << err_;
}

TEST_F(PythonAgentTest, HangTimeoutZeroTurnsDetectionOff) {
  // The sleeping rank is never diagnosed; the job ends when dlaunch is interrupted.
  Launched l(Cmd({"--nproc", "2", "--quiet", "--hang-timeout", "0", "--grace-period", "2",
                  Script("collectives.py"), "sleep"}));
  EXPECT_EQ(l.Wait(seconds(8)), -1) << l.err_text();
  ::kill(l.pid(), SIGINT);
  EXPECT_EQ(l.Wait(seconds(30)), 130) << l.err_text();
  EXPECT_THAT(l.err_text(), ::testing::Not(HasSubstr("HANG")));
}

// SIGINT to dlaunch reaches every rank: rank 1 sleeping in Python, rank 0 waiting inside
// all_reduce #3 (where KeyboardInterrupt cannot reach it). Both leave flight.json.
TEST_F(PythonAgentTest, InterruptedRanksWriteTheirFlightRecorders) {
  Launched l(Cmd({"--nproc", "2", "--hang-timeout", "0", "--grace-period", "5",
                  Script("collectives.py"), "sleep"}));
  auto printed_step2 = [](const std::vector<std::string>& lines) {
    int n = 0;
    for (const std::string& line : lines) n += line.find(" step 2 sum") != std::string::npos;
    return n == 2;
  };
  ASSERT_TRUE(l.WaitFor(printed_step2, std::chrono::seconds(60))) << l.err_text();
  // Rank 0 writes #3 into its tail before it enters the all-reduce.
  const auto deadline = std::chrono::steady_clock::now() + seconds(10);
  while (ReadText(RankDir(0) / "flight_tail.jsonl").find("\"seq\":3,") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(l.pid(), SIGINT);
  EXPECT_EQ(l.Wait(seconds(30)), 130) << l.err_text();
  for (int r = 0; r < 2; ++r) {
    nlohmann::json flight = ReadJson(RankDir(r) / "flight.json");
    ASSERT_TRUE(flight.is_object()) << r;
    EXPECT_EQ(flight["reason"], "signal") << r;
    EXPECT_EQ(flight["entries"].size(), r == 0 ? 4u : 3u) << flight.dump(2);
  }
  EXPECT_EQ(ReadJson(RankDir(0) / "flight.json")["entries"][3]["seq"], 3);
  // Nothing half-written is left behind.
  for (int r = 0; r < 2; ++r) {
    for (const auto& f : std::filesystem::directory_iterator(RankDir(r))) {
      EXPECT_EQ(f.path().filename().string().find(".tmp."), std::string::npos) << f.path();
    }
  }
}

TEST_F(PythonAgentTest, OutOfMemoryIsNamedWithFiguresAndAdvice) {
  Launched l(Cmd({"--nproc", "2", "--quiet", "--grace-period", "3", Script("oom.py")}));
  EXPECT_EQ(l.Wait(seconds(90)), 1) << l.err_text();
  EXPECT_THAT(l.err_text(), HasSubstr("dlaunch: out of memory on rank 1"));
  EXPECT_THAT(l.err_text(), HasSubstr("advice    : "));
  nlohmann::json e = ReadJson(RankDir(1) / "error.json");
  EXPECT_EQ(e["kind"], "oom") << e.dump(2);
  EXPECT_EQ(e["tried_to_allocate_bytes"], int64_t{4} << 42);  // 2^42 floats
  EXPECT_GT(e["memory"]["rss_bytes"].get<int64_t>(), 0);
  EXPECT_FALSE(e["advice"].empty());
  nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
}

TEST_F(PythonAgentTest, DdpRankStalledInBackwardLeavesTheBucketAllReduceWaiting) {
  Launched l(Cmd({"--nproc", "3", "--quiet", "--grace-period", "3", "--hang-timeout", "3",
                  Script("ddp_stall.py")}));
  EXPECT_EQ(l.Wait(seconds(100)), 3) << l.err_text();
  nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["kind"], "hang") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
  // The waiting rank's flight recorder names the bucket and where the DDP model was built.
  nlohmann::json flight = ReadJson(RankDir(0) / "flight.json");
  const nlohmann::json& last = flight["entries"].back();
  EXPECT_NE(last["state"], "completed");  // started, or failed when teardown broke the wait
  // Which bucket waits depends on torch's bucket order (0 on torch 1.13, 1 on 2.15): the entry
  // names the one it is.
  ASSERT_GE(last["bucket"].get<int>(), 0) << last.dump();
  EXPECT_THAT(last["call_site"].get<std::string>(),
              HasSubstr("DDP bucket " + std::to_string(last["bucket"].get<int>()) + " of "));
  EXPECT_THAT(last["call_site"].get<std::string>(), HasSubstr("ddp_stall.py:"));
  EXPECT_THAT(ReadText(RankDir(1) / "py_stacks.txt"), HasSubstr("time.sleep(3600)"));
}

TEST_F(PythonAgentTest, DeclaredSectionIsNotAHang) {
  Launched l(Cmd({"--nproc", "2", "--quiet", "--hang-timeout", "2", Script("section.py")}),
             {"SECTION_S=5"});
  EXPECT_EQ(l.Wait(seconds(90)), 0) << l.err_text();
  EXPECT_THAT(ReadText(RankDir(0) / "stdout.log"), HasSubstr("in_job True rank 0"));
  EXPECT_EQ(ReadJson(RankDir(1) / "heartbeat.json")["step"], 2);
}

TEST_F(PythonAgentTest, OptOutLeavesThePythonRankAlone) {
  Launched l(Cmd({"--nproc", "1", "--no-python-agent", Script("section.py")}));
  EXPECT_EQ(l.Wait(seconds(60)), 0) << l.err_text();
  EXPECT_THAT(ReadText(RankDir(0) / "stdout.log"), HasSubstr("in_job False"));
  EXPECT_FALSE(std::filesystem::exists(RankDir(0) / "heartbeat.json"));
}

}  // namespace
}  // namespace dlaunch::testing
