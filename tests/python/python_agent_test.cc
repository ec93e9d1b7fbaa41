// The Python rank agent in real torch scripts under the launcher: flight recorder, heartbeats,
// hang detection from progress, OOM reports, the dlaunch API.
#include <gmock/gmock.h>
#include <signal.h>

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
  EXPECT_THAT(ReadText(RankDir(0) / "events.jsonl"), HasSubstr("\"kind\":\"telemetry\""));
}

TEST_F(PythonAgentTest, SizeMismatchNamesTheRankAndCollective) {
  EXPECT_NE(RunCollectives("size", 4), 0) << err_;
  nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["kind"], "mismatch") << d.dump(2);
  EXPECT_EQ(d["mismatch_type"], "SIZE_OR_SYNTAX_MISMATCH") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
  EXPECT_EQ(d["seq"], 3);
}

TEST_F(PythonAgentTest, DtypeMismatchIsNamed) {
  EXPECT_NE(RunCollectives("dtype", 4), 0) << err_;
  nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["mismatch_type"], "COLLECTIVE_DTYPE_MISMATCH") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
}

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
  EXPECT_EQ(last["bucket"], 0);
  EXPECT_THAT(last["call_site"].get<std::string>(), HasSubstr("DDP bucket 0 of "));
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
