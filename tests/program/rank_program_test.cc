// Which rank program a command line gives, and what each kind adds to a rank's environment and
// process: the table the job agent relies on without asking the kind itself. Pure.
#include "launcher/program/rank_program.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "core/base/proc.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "launcher/program/plain_program.h"
#include "launcher/program/preflight_program.h"
#include "launcher/program/python_program.h"
#include "launcher/program/train_program.h"

namespace dlaunch::launcher {
namespace {

using Env = RankProgram::Env;

enum class Kind { kPlain, kPython, kTrain, kPreflight };

Kind KindOf(const RankProgram& p) {
  if (dynamic_cast<const PythonProgram*>(&p)) return Kind::kPython;
  if (dynamic_cast<const PlainProgram*>(&p)) return Kind::kPlain;
  if (dynamic_cast<const TrainProgram*>(&p)) return Kind::kTrain;
  EXPECT_NE(dynamic_cast<const PreflightProgram*>(&p), nullptr);
  return Kind::kPreflight;
}

std::shared_ptr<const RankProgram> Make(const std::vector<std::string>& args,
                                        const std::string& agent_dir = "/opt/agent") {
  return MakeRankProgram(ParseCommandLine(args, {}), ProgramSite{"/opt/bin/dlaunch", agent_dir});
}

struct Row {
  std::vector<std::string> args;
  Kind kind;
  bool expects_agent;  // with an agent folder, in a job that did not opt out
  bool agent_pipe;
  bool ignores_usr_signals;
  bool exit_says_verdict;
};

TEST(RankProgramTest, TheCommandLineDecidesTheKindAndWhatItsRanksGet) {
  const std::vector<Row> rows = {
      {{"./prog", "--lr", "1"}, Kind::kPlain, false, true, false, false},
      {{"python3", "t.py"}, Kind::kPlain, false, true, false, false},  // Python, not picked by us
      {{"--no-python", "t.py"}, Kind::kPlain, false, true, false, false},
      {{"--no-python-agent", "./prog"}, Kind::kPlain, false, false, false, false},
      {{"t.py"}, Kind::kPython, true, true, false, false},
      {{"-m", "pkg.train"}, Kind::kPython, true, true, false, false},
      {{"--run-path", "/abs/train"}, Kind::kPython, true, true, false, false},
      {{"--no-python-agent", "t.py"}, Kind::kPython, false, false, false, false},
      {{"train", "--steps", "10"}, Kind::kTrain, false, false, true, true},
      {{"preflight"}, Kind::kPreflight, false, false, true, true},
  };
  for (const Row& row : rows) {
    const std::string line = ::testing::PrintToString(row.args);
    const auto program = Make(row.args);
    ASSERT_NE(program, nullptr) << line;
    EXPECT_EQ(KindOf(*program), row.kind) << line;

    Env job;
    program->AddJobDefaults({}, &job);
    program->AddJobOverrides(&job);
    EXPECT_EQ(program->ExpectsAgent(job, {}), row.expects_agent) << line;

    ProcessSpec process;
    program->ShapeProcess(&process);
    EXPECT_EQ(process.agent_pipe, row.agent_pipe) << line;
    const std::vector<int> ignored =
        row.ignores_usr_signals ? std::vector<int>{SIGUSR1, SIGUSR2} : std::vector<int>{};
    EXPECT_EQ(process.ignored_signals, ignored) << line;
    EXPECT_EQ(program->ExitSaysVerdict(), row.exit_says_verdict) << line;
    EXPECT_FALSE(program->PrintsDocument()) << line;

    // Every kind's rank finds its error file and torch's dumps in its folder.
    Env rank;
    program->AddRankEnv("/logs/run/rank3", {}, &rank);
    EXPECT_EQ(rank["TORCHELASTIC_ERROR_FILE"], "/logs/run/rank3/torch_error.json") << line;
    EXPECT_EQ(rank["TORCH_FR_DUMP_TEMP_FILE"], "/logs/run/rank3/torch_trace_") << line;
  }
}

TEST(RankProgramTest, ProgramRanksGetTheAgentsVariablesAndBuiltinsNone) {
  for (const char* entry : {"./prog", "t.py"}) {
    Env job;
    Make({entry})->AddJobDefaults({{"PYTHONPATH", "/mine"}}, &job);
    EXPECT_EQ(job["PYTHONPATH"], "/opt/agent:/mine") << entry;
    EXPECT_EQ(job["PYTHONUNBUFFERED"], "1") << entry;
    EXPECT_EQ(job["TORCH_NCCL_DUMP_ON_TIMEOUT"], "1") << entry;
    EXPECT_EQ(job.count("DLAUNCH_PYTHON_AGENT"), 0u) << entry;
  }
  Env off;
  Make({"--no-python-agent", "t.py"})->AddJobDefaults({}, &off);
  EXPECT_EQ(off["DLAUNCH_PYTHON_AGENT"], "0");

  Env builtin;
  Make({"train"})->AddJobDefaults({{"PYTHONPATH", "/mine"}}, &builtin);
  Make({"train"})->AddJobOverrides(&builtin);
  EXPECT_TRUE(builtin.empty());
}

// The user's --env comes between the defaults and the overrides: it may replace a default, never
// push the agent's folder off the front of PYTHONPATH.
TEST(RankProgramTest, OverridesKeepTheAgentFirstOverTheUsersPythonPath) {
  Env job = {{"PYTHONPATH", "/theirs"}};
  Make({"t.py"})->AddJobOverrides(&job);
  EXPECT_EQ(job["PYTHONPATH"], "/opt/agent:/theirs");
  Make({"t.py"})->AddJobOverrides(&job);  // already first: not twice
  EXPECT_EQ(job["PYTHONPATH"], "/opt/agent:/theirs");

  Env none = {{"PYTHONPATH", "/theirs"}};
  Make({"t.py"}, "")->AddJobOverrides(&none);  // no agent folder found
  EXPECT_EQ(none["PYTHONPATH"], "/theirs");
}

TEST(RankProgramTest, APythonEntryExpectsTheAgentUnlessTheJobOptsOut) {
  const auto python = Make({"t.py"});
  EXPECT_TRUE(python->ExpectsAgent({}, {}));
  EXPECT_FALSE(python->ExpectsAgent({{"DLAUNCH_PYTHON_AGENT", "0"}}, {}));
  EXPECT_FALSE(python->ExpectsAgent({}, {{"DLAUNCH_PYTHON_AGENT", "0"}}));
  // The job's variable wins over dlaunch's own environment.
  EXPECT_TRUE(
      python->ExpectsAgent({{"DLAUNCH_PYTHON_AGENT", "1"}}, {{"DLAUNCH_PYTHON_AGENT", "0"}}));
  EXPECT_FALSE(Make({"t.py"}, "")->ExpectsAgent({}, {}));  // no agent folder to load
}

TEST(RankProgramTest, VerdictsAndExitCodesOfAFailedRank) {
  RankOutcome crashed;
  crashed.rank = 0;
  crashed.exited = true;
  crashed.exit_code = 7;
  for (const char* entry : {"./prog", "t.py"}) {
    EXPECT_EQ(Make({entry})->ExitCode(crashed), kExitRankFailed) << entry;
    EXPECT_FALSE(Make({entry})->FailureVerdict(crashed, "/nonexistent").has_value()) << entry;
  }
  // A preflight rank that exits 4 said the cluster is unhealthy: dlaunch says so too.
  RankOutcome unhealthy = crashed;
  unhealthy.exit_code = kExitUnhealthy;
  EXPECT_EQ(Make({"preflight"})->ExitCode(unhealthy), kExitUnhealthy);
  EXPECT_EQ(Make({"./prog"})->ExitCode(unhealthy), kExitRankFailed);
  EXPECT_TRUE(Make({"preflight", "--json"})->PrintsDocument());
}

TEST(RankProgramTest, APlainProgramIsFoundAsExecvpWouldFindIt) {
  EXPECT_EQ(Make({"/bin/sh", "-c", "true"})->ResolveArgv(),
            (std::vector<std::string>{"/bin/sh", "-c", "true"}));
  const std::vector<std::string> found = Make({"sh", "-c", "true"})->ResolveArgv();
  ASSERT_EQ(found.size(), 3u);
  EXPECT_NE(found[0].find('/'), std::string::npos);  // looked up in PATH
  EXPECT_THROW(Make({"/no/such/program"})->ResolveArgv(), UsageError);
}

TEST(RankProgramTest, WorkerRanksRunTheWorkerBesideDlaunchOrWhereTheVariableSays) {
  ::setenv("DLAUNCH_WORKER", "/opt/w/dlaunch-worker", 1);
  EXPECT_EQ(Make({"preflight", "--backend", "gloo", "-b", "8K"})->ResolveArgv(),
            (std::vector<std::string>{"/opt/w/dlaunch-worker", "preflight", "--backend", "gloo",
                                      "-b", "8K"}));
  ::unsetenv("DLAUNCH_WORKER");
  // /opt/bin has no dlaunch-worker: the error names the variable that fixes it.
  try {
    Make({"preflight", "--backend", "gloo"})->ResolveArgv();
    ADD_FAILURE() << "no worker, no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("DLAUNCH_WORKER"), std::string::npos) << e.what();
  }
  // The user's input is checked before the worker is looked for: its error is the one to fix.
  EXPECT_THROW(Make({"preflight", "--no-such-flag"})->ResolveArgv(), UsageError);
  if (base::CountGpus() == 0) {
    EXPECT_THROW(Make({"preflight", "--backend", "nccl"})->ResolveArgv(), UsageError);
  }
}

TEST(RankProgramTest, HelpIsTheBuiltinsAnswerAndAPlainProgramsArgument) {
  ::testing::internal::CaptureStdout();
  EXPECT_TRUE(Make({"preflight", "--help"})->PrintHelp());
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("usage"), std::string::npos);
  ::testing::internal::CaptureStdout();
  EXPECT_FALSE(Make({"preflight", "-b", "8K"})->PrintHelp());
  EXPECT_FALSE(Make({"./prog", "--help"})->PrintHelp());  // the program's own flag
  EXPECT_FALSE(Make({"t.py", "--help"})->PrintHelp());
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
}

TEST(RankProgramTest, AWorkerRanksExitCodeIsTheVerdict) {
  RankOutcome failed;
  failed.exited = true;
  for (const char* command : {"train", "preflight"}) {
    failed.exit_code = kExitHang;
    EXPECT_EQ(Make({command})->ExitCode(failed), kExitHang) << command;
    failed.exit_code = 9;
    EXPECT_EQ(Make({command})->ExitCode(failed), kExitRankFailed) << command;
  }
  RankOutcome killed;
  killed.exited = false;
  killed.signal = SIGKILL;
  EXPECT_EQ(Make({"preflight"})->ExitCode(killed), kExitRankFailed);
  EXPECT_FALSE(Make({"preflight"})->FailureVerdict(killed, "/nonexistent").has_value());
  EXPECT_TRUE(Make({"preflight", "--csv"})->PrintsDocument());
}

TEST(RankProgramTest, OnlyProgramsAndBuiltinsRunRanks) {
  EXPECT_TRUE(RunsRanks(Command::kProgram));
  EXPECT_TRUE(RunsRanks(Command::kTrain));
  EXPECT_TRUE(RunsRanks(Command::kPreflight));
  EXPECT_FALSE(RunsRanks(Command::kHelp));
  EXPECT_FALSE(RunsRanks(Command::kDoctor));
  EXPECT_FALSE(RunsRanks(Command::kStatus));
}

}  // namespace
}  // namespace dlaunch::launcher
