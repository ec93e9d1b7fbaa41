// Python entry points launched the way torchrun launches them: the interpreter and where it came
// from, -u, -m, --run-path, the @record error file in the root cause, refusals before launch.
#include <gmock/gmock.h>

#include "launcher/rendezvous/ports.h"
#include "python_test_util.h"

namespace dlaunch::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

class PythonLaunchTest : public PythonJobTest {};

TEST_F(PythonLaunchTest, RecordedExceptionLeadsTheRootCauseAfterChdirAndNoise) {
  Launched l(Cmd({"--nproc", "2", "--quiet", Script("record_error.py")}));
  ASSERT_EQ(l.Wait(seconds(90)), 1) << l.err_text();
  const std::string err = l.err_text();
  EXPECT_THAT(err, HasSubstr("dlaunch: python /usr/bin/python3 (from --python)"));
  EXPECT_THAT(err, HasSubstr("error_file: " + (RankDir(1) / "torch_error.json").string()));
  EXPECT_THAT(err, HasSubstr("error     : ValueError: bad value on rank 1"));
  EXPECT_THAT(err, HasSubstr("traceback :"));
  EXPECT_THAT(err, HasSubstr("raise ValueError(\"bad value on rank 1\")"));
  // @record itself did not fail on the relative path after os.chdir().
  EXPECT_THAT(ReadText(RankDir(1) / "stderr.log"), Not(HasSubstr("FileNotFoundError")));
}

TEST_F(PythonLaunchTest, KilledRankKeepsItsOutputWithoutPythonUnbuffered) {
  Launched l(Cmd({"--nproc", "1", "--quiet", Script("killed_output.py")}), {"PYTHONUNBUFFERED="});
  ASSERT_EQ(l.Wait(seconds(60)), 1) << l.err_text();
  EXPECT_THAT(ReadText(RankDir(0) / "stdout.log"), HasSubstr("before the kill on rank 0"));
}

TEST_F(PythonLaunchTest, ModuleRunsWithDashM) {
  Launched l(Cmd({"--nproc", "2", "-m", "dlaunch_test_pkg.hello", "x", "--flag"}),
             {"PYTHONPATH=" + std::string(DLAUNCH_PY_SCRIPTS)});
  ASSERT_EQ(l.Wait(seconds(60)), 0) << l.err_text();
  EXPECT_THAT(ReadText(RankDir(1) / "stdout.log"),
              HasSubstr("module __main__ rank 1 args ['x', '--flag']"));
}

TEST_F(PythonLaunchTest, RunPathRunsAFileWithoutPyExtension) {
  Launched l(Cmd({"--nproc", "1", "--run-path", Script("run_path_entry"), "a"}));
  ASSERT_EQ(l.Wait(seconds(60)), 0) << l.err_text();
  EXPECT_THAT(ReadText(RankDir(0) / "stdout.log"),
              HasSubstr("run-path __main__ rank 0 argv0 run_path_entry args ['a']"));
}

TEST_F(PythonLaunchTest, PythonExecChoosesTheInterpreter) {
  Launched l(Cmd({"--nproc", "1", Script("dlaunch_test_pkg/hello.py")}, /*with_python=*/false),
             {"PYTHON_EXEC=/usr/bin/python3"});
  ASSERT_EQ(l.Wait(seconds(60)), 0) << l.err_text();
  EXPECT_THAT(l.err_text(), HasSubstr("dlaunch: python /usr/bin/python3 (from PYTHON_EXEC)"));
}

TEST_F(PythonLaunchTest, TorchScriptWhoseInterpreterLacksTorchIsRefused) {
  // An interpreter without site-packages cannot find torch.
  const auto fake = dir_ / "python-without-torch";
  std::ofstream(fake) << "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n";
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  Launched l(Cmd({"--python", fake.string(), "--nproc", "2", Script("record_error.py")}, false));
  ASSERT_EQ(l.Wait(seconds(60)), 2) << l.err_text();
  EXPECT_THAT(l.err_text(), HasSubstr("record_error.py imports torch, but " + fake.string()));
  EXPECT_THAT(l.err_text(), HasSubstr("Fix: "));
  EXPECT_FALSE(std::filesystem::exists(RankDir(0)));
}

// The interpreter itself finds torch in every form of import (#28), and an import a script
// guards with `except ImportError` is not a need.
TEST_F(PythonLaunchTest, EveryFormOfTorchImportIsFoundByTheInterpreter) {
  const auto fake = dir_ / "python-without-torch";
  std::ofstream(fake) << "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n";
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  auto script = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  };
  for (const std::string& s :
       {script("comma.py", "import os, time, torch\n"),
        script("importlib.py", "import importlib\nt = importlib.import_module(\"torch\")\n"),
        script("dunder.py", "def f():\n    return __import__('torch.distributed')\nf()\n"),
        script("from.py", "if True:\n  from torch.nn import Linear\n")}) {
    Launched l(Cmd({"--python", fake.string(), s}, false));
    EXPECT_EQ(l.Wait(seconds(30)), 2) << s << "\n" << l.err_text();
    EXPECT_THAT(l.err_text(), HasSubstr(s + " imports torch, but " + fake.string()));
  }
  for (const std::string& s :
       {script("guarded.py", "try:\n    import torch\nexcept ImportError:\n    torch = None\n"),
        script("comment.py", "# torch is not needed here\nprint('torch-free')\n")}) {
    Launched l(Cmd({"--python", fake.string(), s}, false));
    EXPECT_EQ(l.Wait(seconds(30)), 0) << s << "\n" << l.err_text();
  }
}

// On one node, torchrun's --rdzv_endpoint is where rank 0's TCPStore listens (#28): a gloo
// process group meets at that port.
TEST_F(PythonLaunchTest, SingleNodeRendezvousEndpointIsTheRanksMasterPort) {
  const std::string port = std::to_string(launcher::PickFreePort("127.0.0.1"));
  std::ofstream(dir_ / "meet.py")
      << "import os\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"
         "dist.barrier()\nprint('met at', os.environ['MASTER_ADDR'], os.environ['MASTER_PORT'],"
         " 'world', dist.get_world_size())\n";
  Launched l(Cmd({"--nproc", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint", "localhost:" + port,
                  (dir_ / "meet.py").string()}));
  ASSERT_EQ(l.Wait(seconds(90)), 0) << l.err_text();
  EXPECT_THAT(ReadText(RankDir(1) / "stdout.log"),
              HasSubstr("met at localhost " + port + " world 2"));
}

TEST_F(PythonLaunchTest, BadPythonFlagsExitTwo) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--python", "/no/such/python", Script("killed_output.py")},
           {"-m", "--run-path", "x"},
           {"--no-python", "-m", "x"},
           {Script("no_such_script.py")}}) {
    Launched l(Cmd(args, false));
    EXPECT_EQ(l.Wait(seconds(30)), 2) << l.err_text();
  }
}

}  // namespace
}  // namespace dlaunch::testing

namespace dlaunch::testing {
namespace {

// `dlaunch diagnose` on a run directory holding PyTorch's own flight-recorder dumps (fixtures in
// torch 2.x's structure): the text shows them beside the verdict, --json carries torch_flight.
TEST(DiagnoseTorchDumpsTest, TextAndJsonShowTorchsRecords) {
  const std::string dir = std::string(DLAUNCH_PY_FIXTURES) + "/torch_fr_hang";
  Launched text({DLAUNCH_BIN, "diagnose", dir});
  ASSERT_EQ(text.Wait(std::chrono::seconds(30)), 0) << text.err_text();
  std::string out;
  for (const std::string& l : text.out_lines) out += l + "\n";
  EXPECT_THAT(out, ::testing::HasSubstr("HANG at collective #5 allreduce float x1024"));
  EXPECT_THAT(out, ::testing::HasSubstr("rank 2 never entered"));
  EXPECT_THAT(out,
              ::testing::HasSubstr("PyTorch flight recorder (rank1/torch_trace_1, version 2.4"));
  EXPECT_THAT(out, ::testing::HasSubstr("rank 2 never joined it"));

  Launched json({DLAUNCH_BIN, "diagnose", dir, "--json"});
  ASSERT_EQ(json.Wait(std::chrono::seconds(30)), 0) << json.err_text();
  std::string doc;
  for (const std::string& l : json.out_lines) doc += l + "\n";
  nlohmann::json d = nlohmann::json::parse(doc, nullptr, false);
  ASSERT_TRUE(d.is_object()) << doc;
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({2}));
  EXPECT_EQ(d["torch_flight"]["dumps"].size(), 3u);
  EXPECT_EQ(d["torch_flight"]["findings"][0]["missing_ranks"], nlohmann::json::array({2}));
  EXPECT_EQ(d["torch_flight"]["dumps"][0]["entries"].back()["profiling_name"], "nccl:all_reduce");
}

}  // namespace
}  // namespace dlaunch::testing
