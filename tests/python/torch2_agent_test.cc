// The Python rank agent on torch 2.x's ways of issuing collectives (torch2_ops.py, Gloo on CPU):
// DDP with and without torch.compile, FSDP2's fully_shard over a DeviceMesh, DTensor,
// functional collectives, coalesced ops, batch_isend_irecv and a 2 x 2 mesh of process groups.
// Each is recorded (op, group, seq, dtype, size, call site), its hang is named with the Python
// stack of the rank that stalls (in the 2 x 2 mesh, each rank in turn, with its group and the
// group's seq), and its size mismatch names the sender. Run on the torch 2.x venv (ctest -L
// torch2); on torch 1.13 a mode whose API it lacks is skipped with torch's error.
#include <gmock/gmock.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "python_test_util.h"

namespace dlaunch::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

struct Mode {
  const char* name;
  int nproc;
  std::set<std::string> ops;  // the ops its flight records hold (barrier aside)
};

std::ostream& operator<<(std::ostream& os, const Mode& m) { return os << m.name; }

const Mode kModes[] = {
    {"ddp", 2, {"allreduce"}},
    {"ddp_compile", 2, {"allreduce"}},
    {"fsdp2", 2, {"allgather", "reduce_scatter"}},
    {"dtensor", 2, {"allgather", "allreduce", "broadcast"}},
    {"funcol", 2, {"allreduce", "allgather", "reduce_scatter"}},
    {"coalesced", 2, {"allreduce"}},
    {"batch_p2p", 3, {"send", "recv"}},
    {"groups2x2", 4, {"allreduce"}},
};

class Torch2AgentTest : public PythonJobTest, public ::testing::WithParamInterface<Mode> {
 protected:
  // torch2_ops.py MODE FAULT under the launcher; the exit code. A mode torch cannot run here
  // (exit 3 and "UNSUPPORTED: <torch's error>" on a rank's stdout) skips the test, saying why.
  int Run(const std::string& fault, int* unsupported_skip) {
    const Mode& m = GetParam();
    Launched l(Cmd({"--nproc", std::to_string(m.nproc), "--quiet", "--grace-period", "3",
                    // A healthy run on a loaded machine must not be taken for a hang.
                    "--hang-timeout", fault == "ok" ? "60" : "3", Script("torch2_ops.py"), m.name,
                    fault}));
    const int code = l.Wait(seconds(150));
    err_ = l.err_text();
    const std::string out = ReadText(RankDir(0) / "stdout.log");
    const size_t at = out.find("UNSUPPORTED: ");
    *unsupported_skip = at != std::string::npos;
    if (*unsupported_skip) unsupported_ = out.substr(at, out.find('\n', at) - at);
    return code;
  }
  std::string err_, unsupported_;
};

#define SKIP_IF_UNSUPPORTED(flag) \
  if (flag) GTEST_SKIP() << GetParam().name << " cannot run here: " << unsupported_

TEST_P(Torch2AgentTest, RecordsEveryCollective) {
  int unsupported = 0;
  const int code = Run("ok", &unsupported);
  SKIP_IF_UNSUPPORTED(unsupported);
  ASSERT_EQ(code, 0) << err_;
  for (int r = 0; r < GetParam().nproc; ++r) {
    nlohmann::json flight = ReadJson(RankDir(r) / "flight.json");
    ASSERT_TRUE(flight.is_object()) << r << err_;
    EXPECT_EQ(flight["backend"], "gloo");
    std::set<std::string> ops;
    int64_t seq = 0;
    for (const nlohmann::json& e : flight["entries"]) {
      EXPECT_EQ(e["seq"], seq++) << e.dump();
      EXPECT_EQ(e["state"], "completed") << e.dump();
      ASSERT_TRUE(flight["process_groups"].contains(e["pg"].get<std::string>())) << e.dump();
      EXPECT_GE(e["pg_seq"].get<int64_t>(), 0);
      if (e["op"] == "barrier") continue;
      ops.insert(e["op"].get<std::string>());
      EXPECT_EQ(e["dtype"], "float") << e.dump();
      EXPECT_GT(e["count"].get<int64_t>(), 0) << e.dump();
      EXPECT_GT(e["bytes"].get<int64_t>(), 0) << e.dump();
      // DDP's buckets name the line that built the model; the others the line that called.
      EXPECT_THAT(e["call_site"].get<std::string>(), HasSubstr("torch2_ops.py:")) << e.dump();
    }
    EXPECT_EQ(ops, GetParam().ops) << r;
  }
}

TEST_P(Torch2AgentTest, HangNamesTheStalledRankGroupSeqAndStack) {
  int unsupported = 0;
  const int code = Run("hang", &unsupported);
  SKIP_IF_UNSUPPORTED(unsupported);
  EXPECT_EQ(code, 3) << err_;
  nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["kind"], "hang") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
  // The collective in question is the one rank 0 waits in (its flight recorder's first call
  // not completed), of rank 0's group with rank 1.
  nlohmann::json flight = ReadJson(RankDir(0) / "flight.json");
  ASSERT_TRUE(flight.is_object()) << err_;
  const nlohmann::json* waiting = nullptr;
  for (const nlohmann::json& e : flight["entries"]) {
    if (e["state"] != "completed") {
      waiting = &e;
      break;
    }
  }
  ASSERT_NE(waiting, nullptr) << flight.dump(2);
  EXPECT_EQ(d["seq"], (*waiting)["seq"]) << d.dump(2);
  EXPECT_EQ(d["op"], (*waiting)["op"]) << d.dump(2);
  const nlohmann::json& members = flight["process_groups"][(*waiting)["pg"].get<std::string>()];
  EXPECT_THAT(members["ranks"].dump(), HasSubstr("1")) << flight.dump(2);
  EXPECT_THAT(ReadText(RankDir(1) / "py_stacks.txt"), HasSubstr("time.sleep(3600)"));
  EXPECT_THAT(d["ranks"][1]["stack_top"].get<std::string>(), HasSubstr("torch2_ops.py:"))
      << d.dump(2);
}

// Rank 1's first collective of step 2 has 1024 more elements (for DTensor, its shard 1024 more
// rows): the sender is named.
class Torch2SizeMismatchTest : public Torch2AgentTest {};

TEST_P(Torch2SizeMismatchTest, NamesTheSender) {
  int unsupported = 0;
  const int code = Run("size", &unsupported);
  SKIP_IF_UNSUPPORTED(unsupported);
  EXPECT_NE(code, 0) << err_;
  nlohmann::json d = Diagnosis();
  if (std::string(GetParam().name) == "batch_p2p") {
    // Rank 1 sends rank 2 more than rank 2 receives. Gloo aborts the receiver, and whichever of
    // ranks 0 and 1 then reports the broken connection first does not matter: the send and the
    // recv it pairs with differ, and the sender is named.
    EXPECT_EQ(d["kind"], "mismatch") << d.dump(2);
    EXPECT_EQ(d["mismatch_type"], "SIZE_OR_SYNTAX_MISMATCH") << d.dump(2);
    EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
    EXPECT_THAT(d["headline"].get<std::string>(),
                HasSubstr("rank 1 sent float x5120 (20 KiB) to rank 2 (its #"))
        << d.dump(2);
    EXPECT_THAT(d["headline"].get<std::string>(),
                HasSubstr("while rank 2 received float x4096 (16 KiB) from it"))
        << d.dump(2);
    EXPECT_THAT(d["details"].dump(), HasSubstr("so the sender's size is wrong")) << d.dump(2);
    return;
  }
  EXPECT_EQ(d["kind"], "mismatch") << d.dump(2);
  EXPECT_EQ(d["mismatch_type"], "SIZE_OR_SYNTAX_MISMATCH") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
  EXPECT_THAT(d["headline"].get<std::string>(), HasSubstr("rank 1 called ")) << d.dump(2);
}

// A 2 x 2 mesh (groups2x2: tp groups {0,1} and {2,3}, dp groups {0,2} and {1,3}) with each rank
// in turn stalled before its tp all_reduce of step 2, asleep or SIGSTOPped. Its tp peer waits in
// that call while the other pair completed a call of the same seq on their own tp group: the hang
// is matched in the peer's group by the group's pg_seq, and the headline and diagnosis.json name
// the stalled rank, the group (its ranks and torch's name for it) and both seqs.
struct MeshStall {
  int rank;
  const char* fault;  // torch2_ops.py's: hang (sleeps) | stop (SIGSTOP)
};

std::ostream& operator<<(std::ostream& os, const MeshStall& m) {
  return os << "rank" << m.rank << "_" << m.fault;
}

class Torch2MeshHangTest : public PythonJobTest, public ::testing::WithParamInterface<MeshStall> {};

TEST_P(Torch2MeshHangTest, NamesTheStalledRankItsGroupAndBothSeqs) {
  const int stalled = GetParam().rank, peer = stalled ^ 1;
  Launched l(Cmd({"--nproc", "4", "--quiet", "--grace-period", "3", "--hang-timeout", "3",
                  Script("torch2_ops.py"), "groups2x2", GetParam().fault}),
             {"FAULT_RANK=" + std::to_string(stalled)});
  const int code = l.Wait(seconds(150));
  const std::string out = ReadText(RankDir(0) / "stdout.log");
  if (const size_t at = out.find("UNSUPPORTED: "); at != std::string::npos) {
    GTEST_SKIP() << out.substr(at, out.find('\n', at) - at);  // torch 1.13: no DeviceMesh
  }
  EXPECT_EQ(code, 3) << l.err_text();
  const nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["kind"], "hang") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({stalled})) << d.dump(2);
  // The call the peer waits in: the first of its flight recorder not completed.
  const nlohmann::json flight = ReadJson(RankDir(peer) / "flight.json");
  ASSERT_TRUE(flight.is_object()) << l.err_text();
  nlohmann::json waiting;
  for (const nlohmann::json& e : flight["entries"]) {
    if (e["state"] != "completed") {
      waiting = e;
      break;
    }
  }
  ASSERT_TRUE(waiting.is_object()) << flight.dump(2);
  const int low = std::min(stalled, peer), high = std::max(stalled, peer);
  EXPECT_EQ(d["seq"], waiting["seq"]) << d.dump(2);
  EXPECT_EQ(d["pg"], waiting["pg"]) << d.dump(2);
  EXPECT_EQ(d["pg_seq"], waiting["pg_seq"]) << d.dump(2);
  EXPECT_EQ(d["pg_ranks"], nlohmann::json::array({low, high})) << d.dump(2);
  EXPECT_EQ(d["pg_desc"], "mesh_tp") << d.dump(2);
  const std::string headline = d["headline"].get<std::string>();
  EXPECT_THAT(headline,
              HasSubstr("HANG at collective #" + waiting["seq"].dump() +
                        " allreduce float 4 KiB on group mesh_tp {" + std::to_string(low) + "," +
                        std::to_string(high) + "} (pg_seq " + waiting["pg_seq"].dump() +
                        "): rank " + std::to_string(peer) + " waiting "));
  EXPECT_THAT(headline, HasSubstr("; rank " + std::to_string(stalled) + " "));
  EXPECT_THAT(headline, ::testing::Not(HasSubstr("completed it")));
}

INSTANTIATE_TEST_SUITE_P(Ranks, Torch2MeshHangTest,
                         ::testing::Values(MeshStall{0, "hang"}, MeshStall{1, "hang"},
                                           MeshStall{2, "hang"}, MeshStall{3, "hang"},
                                           MeshStall{3, "stop"}),
                         [](const auto& info) {
                           return "rank" + std::to_string(info.param.rank) + "_" + info.param.fault;
                         });

// torch's flight-recorder ring size reaches each torch under the name it reads: on torch >= 2.7
// TORCH_FR_BUFFER_SIZE alone (the agent unsets dlaunch's TORCH_NCCL_TRACE_BUFFER_SIZE before
// torch reads it, so no rank warns that it is deprecated), on older ones the old name too; a
// size the user set under the old name stays.
class Torch2FlightEnvTest : public PythonJobTest {
 protected:
  // fr_env.py on 2 ranks; rank 0's line "torch=X FR=Y OLD=Z entries=N".
  std::string Run(std::vector<std::string> env = {}) {
    Launched l(Cmd({"--nproc", "2", "--quiet", Script("fr_env.py")}), std::move(env));
    EXPECT_EQ(l.Wait(seconds(100)), 0) << l.err_text();
    const std::string out = ReadText(RankDir(0) / "stdout.log");
    const size_t at = out.find("torch=");
    return at == std::string::npos ? out : out.substr(at, out.find('\n', at) - at);
  }
  static bool ReadsNewName(const std::string& line) {
    int major = 0, minor = 0;
    return std::sscanf(line.c_str(), "torch=%d.%d", &major, &minor) == 2 &&
           (major > 2 || (major == 2 && minor >= 7));
  }
};

TEST_F(Torch2FlightEnvTest, EachTorchGetsTheNameItReadsWithoutAWarning) {
  const std::string line = Run();
  if (ReadsNewName(line)) {
    EXPECT_THAT(line, HasSubstr("FR=2000 OLD=- ")) << line;
    EXPECT_THAT(line, ::testing::Not(HasSubstr("entries=0"))) << line;  // the ring is on
  } else {
    EXPECT_THAT(line, HasSubstr("FR=2000 OLD=2000 ")) << line;
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(ReadText(RankDir(r) / "stderr.log"), ::testing::Not(HasSubstr("deprecated"))) << r;
  }
}

TEST_F(Torch2FlightEnvTest, TheUsersOldNameStays) {
  const std::string line = Run({"TORCH_NCCL_TRACE_BUFFER_SIZE=50"});
  EXPECT_THAT(line, HasSubstr("FR=- OLD=50 ")) << line;
}

// A scatter, gather, broadcast, reduce, all-to-all with uneven splits and send/recv that succeed
// (torch2_ops.py rooted): their ranks carry different tensors by design, and neither dlaunch's
// records nor torch's own flight recorder (which the agent dumps at exit) makes them a mismatch.
class Torch2RootedOpsTest : public PythonJobTest, public ::testing::WithParamInterface<int> {};

TEST_P(Torch2RootedOpsTest, SucceedWithoutAMismatch) {
  Launched l(Cmd({"--nproc", std::to_string(GetParam()), "--grace-period", "3", "--hang-timeout",
                  "60", Script("torch2_ops.py"), "rooted", "ok"}));
  ASSERT_EQ(l.Wait(seconds(150)), 0) << l.err_text();
  Launched diagnose({DLAUNCH_BIN, "diagnose", RunDir().string()});
  ASSERT_EQ(diagnose.Wait(seconds(60)), 0) << diagnose.err_text();
  std::string text;
  for (const std::string& line : diagnose.out_lines) text += line + "\n";
  EXPECT_THAT(text, HasSubstr("OK: all " + std::to_string(GetParam()) + " ranks exited 0")) << text;
  EXPECT_THAT(text, ::testing::Not(HasSubstr("MISMATCH"))) << text;
  EXPECT_THAT(text, ::testing::Not(HasSubstr("never joined"))) << text;
  EXPECT_THAT(l.err_text() + ReadText(RankDir(0) / "stderr.log"),
              ::testing::Not(HasSubstr("MISMATCH")));
}

INSTANTIATE_TEST_SUITE_P(Ranks, Torch2RootedOpsTest, ::testing::Values(2, 3, 4));

const Mode kSizeModes[] = {kModes[3], kModes[4], kModes[5], kModes[6], kModes[7]};

INSTANTIATE_TEST_SUITE_P(Modes, Torch2SizeMismatchTest, ::testing::ValuesIn(kSizeModes),
                         [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(Modes, Torch2AgentTest, ::testing::ValuesIn(kModes),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace dlaunch::testing
