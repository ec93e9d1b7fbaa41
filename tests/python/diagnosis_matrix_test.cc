// The diagnosis across a matrix of real faults (tests/python/scripts/faults.py under dlaunch,
// torch 1.13 on Gloo): each case's headline names the right ranks, or says explicitly that the
// evidence cannot decide; never a wrong name. With DLAUNCH_MATRIX_REPORT=<file>, each case
// appends "mode<TAB>exit<TAB>wall ms<TAB>fault-to-exit ms<TAB>headline" for BENCHMARKS.md
// (fault-to-exit: from the fault script's "fault_unix_ms=" line to the launcher's exit). Each
// case's diagnosis, taken again offline by `dlaunch diagnose`, names the same culprits and
// collective and places the ranks at the same last completed seqs.
#include <gmock/gmock.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <regex>

#include "python_test_util.h"

namespace dlaunch::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct FaultCase {
  std::string mode;
  int nproc = 2;
  std::string kind;           // diagnosis.json's kind
  std::vector<int> culprits;  // exactly these (empty: none named)
  std::vector<std::string> says;
  std::vector<std::string> never_says = {};
  std::vector<std::string> env = {};
  std::string hang_timeout = "3";
};

std::ostream& operator<<(std::ostream& os, const FaultCase& c) { return os << c.mode; }

class DiagnosisMatrixTest : public PythonJobTest, public ::testing::WithParamInterface<FaultCase> {
 protected:
  // The earliest "fault_unix_ms=" any rank printed; 0 when none did.
  int64_t FaultUnixMs(int nproc) const {
    static const std::regex fault_re("fault_unix_ms=([0-9]+)");
    int64_t earliest = 0;
    for (int r = 0; r < nproc; ++r) {
      const std::string out = ReadText(RankDir(r) / "stdout.log");
      std::smatch m;
      if (std::regex_search(out, m, fault_re)) {
        const int64_t at = std::stoll(m[1].str());
        if (earliest == 0 || at < earliest) earliest = at;
      }
    }
    return earliest;
  }
};

// DLAUNCH_MATRIX_LAUNCHER=<dlaunch> runs the matrix against another build (an older commit's,
// to compare); the one built with this test otherwise.
std::string Launcher() {
  const char* other = std::getenv("DLAUNCH_MATRIX_LAUNCHER");
  return other && *other ? other : DLAUNCH_BIN;
}

// `dlaunch diagnose` on the run directory the job left: it reads the same evidence as the
// diagnosis the job wrote (live, or after the failed attempt), in the same order of trust, so it
// names the same culprits and collective and places every rank at the same last completed seq.
void ExpectOfflineAgrees(const std::filesystem::path& run_dir, const nlohmann::json& job) {
  Launched diagnose({Launcher(), "diagnose", run_dir.string(), "--json"});
  ASSERT_NE(diagnose.Wait(std::chrono::seconds(60)), -1) << diagnose.err_text();
  std::string text;
  for (const std::string& line : diagnose.out_lines) text += line + "\n";
  const nlohmann::json offline = nlohmann::json::parse(text, nullptr, false);
  ASSERT_TRUE(offline.is_object()) << text << diagnose.err_text();
  const std::string both = "job's:\n" + job.dump(2) + "\noffline:\n" + offline.dump(2);
  EXPECT_EQ(offline["culprit_ranks"], job["culprit_ranks"]) << both;
  EXPECT_EQ(offline["seq"], job["seq"]) << both;
  EXPECT_EQ(offline["op"], job["op"]) << both;
  ASSERT_EQ(offline["ranks"].size(), job["ranks"].size()) << both;
  for (size_t r = 0; r < job["ranks"].size(); ++r) {
    EXPECT_EQ(offline["ranks"][r]["last_completed_seq"], job["ranks"][r]["last_completed_seq"])
        << "rank " << r << "\n"
        << both;
    EXPECT_NE(offline["ranks"][r].value("progress_from", "?"), "?") << both;
  }
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST_P(DiagnosisMatrixTest, HeadlineIsRightOrUndecided) {
  const FaultCase& c = GetParam();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> argv =
      Cmd({"--nproc", std::to_string(c.nproc), "--quiet", "--grace-period", "3", "--hang-timeout",
           c.hang_timeout, Script("faults.py"), c.mode});
  argv[0] = Launcher();
  Launched l(argv, c.env);
  const int code = l.Wait(std::chrono::seconds(100));
  const int64_t exited_ms = NowUnixMs();
  const auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  ASSERT_NE(code, -1) << "no exit within 100 s\n" << l.err_text();
  // diagnosis.json is written for a failed or hung job; a clean one is diagnosed on demand.
  nlohmann::json d = Diagnosis();
  if (std::filesystem::exists(RunDir() / "diagnosis.json")) {
    ExpectOfflineAgrees(RunDir(), d);
  } else {
    Launched diagnose({Launcher(), "diagnose", RunDir().string(), "--json"});
    ASSERT_EQ(diagnose.Wait(std::chrono::seconds(60)), 0) << diagnose.err_text();
    std::string text;
    for (const std::string& line : diagnose.out_lines) text += line + "\n";
    d = nlohmann::json::parse(text, nullptr, false);
  }
  ASSERT_TRUE(d.is_object()) << l.err_text();
  const std::string headline = d.value("headline", "");
  const int64_t fault = FaultUnixMs(c.nproc);
  if (const char* report = std::getenv("DLAUNCH_MATRIX_REPORT")) {
    std::ofstream(report, std::ios::app)
        << c.mode << "\t" << code << "\t" << wall << "\t" << (fault > 0 ? exited_ms - fault : -1)
        << "\t" << headline << "\n";
  }
  EXPECT_EQ(d["kind"], c.kind) << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json(c.culprits)) << d.dump(2);
  for (const std::string& s : c.says) EXPECT_THAT(headline, HasSubstr(s)) << d.dump(2);
  for (const std::string& s : c.never_says) EXPECT_THAT(headline, Not(HasSubstr(s))) << d.dump(2);
  // The rank lines mark exactly the culprits.
  for (const nlohmann::json& r : d["ranks"]) {
    const int rank = r.value("rank", -1);
    const bool named = std::find(c.culprits.begin(), c.culprits.end(), rank) != c.culprits.end();
    EXPECT_EQ(r.value("line", "").find("[culprit]") != std::string::npos, named) << r.dump();
  }
  if (c.mode == "loader") {
    // The user's loop and the DataLoader frame that explains the wait lead the stack.
    const std::string top = d["ranks"][1].value("stack_top", "");
    EXPECT_EQ(top.rfind("faults.py:", 0), 0u) << top;
    EXPECT_THAT(top, HasSubstr("> dataloader.py:")) << top;
    EXPECT_THAT(top, HasSubstr("_next_data; innermost: ")) << top;
    // Then the worker it waits for, at the user's frame in that worker's own stacks.
    const size_t worker = top.find("; waits for DataLoader worker 0 (pid ");
    ASSERT_NE(worker, std::string::npos) << top;
    EXPECT_THAT(top.substr(worker), HasSubstr(") at faults.py:")) << top;
    EXPECT_THAT(top.substr(worker), HasSubstr(" __getitem__")) << top;
  }
}

const std::vector<FaultCase> kCases = {
    {"ok", 2, "ok", {}, {"OK: all 2 ranks exited 0"}},
    {"silent", 2, "ok", {}, {"OK: all 2 ranks exited 0"}, {}, {"SILENT_S=5"}, "2"},
    // Rank 0 skips all_reduce #6 and meets rank 1's all_reduce with its barrier: an even split,
    // decided by the calls before it (all_reduce, barrier, repeated).
    {"skip",
     2,
     "mismatch",
     {0},
     {"(COLLECTIVE_TYPE_MISMATCH): rank 0 called barrier", "rank 0 broke the pattern at #6"}},
    // The very first call: no history to decide by.
    {"skip_first",
     2,
     "mismatch",
     {},
     {"rank 0 called barrier", "rank 1 called allreduce float x1024 at ",
      "one of them skipped a call (undecided"}},
    {"extra", 2, "mismatch", {1}, {"rank 1 broke the pattern at #"}},
    {"size",
     2,
     "mismatch",
     {1},
     {"(SIZE_OR_SYNTAX_MISMATCH): rank 1 called allreduce float x1280"}},
    {"dtype", 2, "mismatch", {1}, {"(COLLECTIVE_DTYPE_MISMATCH): rank 1 called allreduce double"}},
    {"op", 2, "mismatch", {1}, {"(COLLECTIVE_TYPE_MISMATCH): rank 1 called broadcast"}},
    {"size", 3, "mismatch", {1}, {"rank 1 called allreduce float x1280"}},
    {"group_order",
     2,
     "hang",
     {0, 1},
     {"deadlock: rank 0 waits in allreduce on group 1 (seq 0) at ",
      "rank 1 waits in allreduce on the default group (seq 6) at ",
      "the ranks call these groups in different orders"}},
    {"early_exit", 2, "hang", {1}, {"rank 1 never entered", "exited with code 0"}},
    {"exit0", 2, "ok", {}, {"OK: all 2 ranks exited 0"}},
    {"exit1", 2, "failure", {1}, {"FAILURE: rank 1 exited with code 1"}},
    {"exit2", 2, "failure", {1}, {"FAILURE: rank 1 exited with code 2"}},
    {"exit3", 2, "failure", {1}, {"FAILURE: rank 1 exited with code 3"}, {"HANG", "watchdog"}},
    {"exit4", 2, "failure", {1}, {"FAILURE: rank 1 exited with code 4"}},
    {"exit5", 2, "failure", {1}, {"FAILURE: rank 1 exited with code 5"}},
    {"exit3_nodist", 2, "failure", {1}, {"FAILURE: rank 1 exited with code 3"}, {"HANG"}},
    {"crash", 2, "failure", {1}, {"FAILURE: rank 1 ", "the model diverged on rank 1"}},
    {"selfkill", 2, "failure", {1}, {"rank 1 was killed by SIGKILL"}, {"out of memory", "#-1"}},
    {"stop", 2, "hang", {1}, {"T (stopped)"}},
    {"sleep", 2, "hang", {1}, {"rank 1 never entered"}},
    {"loader", 2, "hang", {1}, {"rank 1 never entered"}},
};

INSTANTIATE_TEST_SUITE_P(Faults, DiagnosisMatrixTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<FaultCase>& info) {
                           return info.param.mode + "_" + std::to_string(info.param.nproc);
                         });

// The pid of `rank` of the job writing into `run_dir` (from /proc/*/environ): the launcher offers
// no event for "rank 1 has started".
int FindRankPid(const std::filesystem::path& run_dir, int rank) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream env(entry.path() / "environ", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    if (all.find("DLAUNCH_RUN_DIR=" + run_dir.string() + '\0') != std::string::npos &&
        all.find(std::string(1, '\0') + "RANK=" + std::to_string(rank) + '\0') !=
            std::string::npos) {
      return std::stoi(name);
    }
  }
  return -1;
}

// A SIGSTOPped built-in train rank: the trainer's heartbeats carry the collective seqs, so the
// hang timeout (3 s) finds it, not the heartbeat timeout (30 s by default).
TEST_F(PythonJobTest, StoppedTrainRankIsFoundByTheHangTimeout) {
  Launched l(Cmd({"--nproc",
                  "2",
                  "--quiet",
                  "--grace-period",
                  "3",
                  "--hang-timeout",
                  "3",
                  "train",
                  "--data",
                  "synthetic",
                  "--model",
                  "mlp",
                  "--features",
                  "16",
                  "--hidden",
                  "32",
                  "--classes",
                  "4",
                  "--samples",
                  "512",
                  "--batch-size",
                  "16",
                  "--steps",
                  "1000000",
                  "--heartbeat-interval",
                  "0.05"},
                 false));
  auto step_line = [](const std::vector<std::string>&) { return false; };
  int pid = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    // Events are written as they happen; polling them is the only sign of training under way.
    l.WaitFor(step_line, std::chrono::milliseconds(100));
    // 40 telemetry lines (2 s at 0.05 s): well into training, its seqs beaten at least once.
    const std::string events = ReadText(RankDir(1) / "events.jsonl");
    size_t lines = 0;
    for (size_t at = events.find("\"kind\":\"telemetry\""); at != std::string::npos;
         at = events.find("\"kind\":\"telemetry\"", at + 1)) {
      ++lines;
    }
    if (lines < 40) continue;
    pid = FindRankPid(std::filesystem::weakly_canonical(RunDir()), 1);
    if (pid > 0) break;
  }
  ASSERT_GT(pid, 0) << l.err_text();
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  const int64_t stopped = NowUnixMs();
  const int code = l.Wait(std::chrono::seconds(90));
  const int64_t exited = NowUnixMs();
  ::kill(pid, SIGKILL);  // in case teardown could not reach it
  EXPECT_EQ(code, 3) << l.err_text();
  const nlohmann::json d = Diagnosis();
  EXPECT_EQ(d["kind"], "hang") << d.dump(2);
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
  EXPECT_THAT(d.value("trigger", ""), Not(HasSubstr("no heartbeat"))) << d.dump(2);
  EXPECT_THAT(d.value("headline", ""), HasSubstr("T (stopped)")) << d.dump(2);
  EXPECT_THAT(d.value("headline", ""), Not(HasSubstr("#-1"))) << d.dump(2);
  if (const char* report = std::getenv("DLAUNCH_MATRIX_REPORT")) {
    std::ofstream(report, std::ios::app) << "train_stop\t" << code << "\t-1\t" << exited - stopped
                                         << "\t" << d.value("headline", "") << "\n";
  }
}

}  // namespace
}  // namespace dlaunch::testing
