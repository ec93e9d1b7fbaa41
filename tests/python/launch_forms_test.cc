// Every form of command line that starts a Python rank, each with a hang, a mismatch and an OOM:
// the rank's agent says it runs as it starts, so the diagnosis cannot depend on how the
// interpreter was named (`script.py`, `--python P script.py`, `-- python3 script.py`,
// `python3 script.py`, `-m module`, `--run-path file`).
#include <gmock/gmock.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "python_test_util.h"

namespace dlaunch::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

enum class Form { kScript, kPythonFlag, kDashDashPython, kPython, kModule, kRunPath };
enum class Fault { kHang, kMismatch, kOom };

struct Case {
  Form form;
  Fault fault;
};

std::string FormName(Form f) {
  switch (f) {
    case Form::kScript:
      return "Script";
    case Form::kPythonFlag:
      return "PythonFlag";
    case Form::kDashDashPython:
      return "DashDashPython";
    case Form::kPython:
      return "Python";
    case Form::kModule:
      return "Module";
    case Form::kRunPath:
      return "RunPath";
  }
  return "";
}

std::string FaultName(Fault f) {
  switch (f) {
    case Fault::kHang:
      return "Hang";
    case Fault::kMismatch:
      return "Mismatch";
    case Fault::kOom:
      return "Oom";
  }
  return "";
}

class LaunchFormTest : public PythonJobTest, public ::testing::WithParamInterface<Case> {
 protected:
  // `python3` on PATH runs the test's interpreter, as it does for a user whose PATH finds torch
  // (a script, not a link: a link to a venv's python would not find the venv). The launcher
  // inherits this process's PATH, so it is changed here for the test's duration.
  void SetUp() override {
    PythonJobTest::SetUp();
    const std::filesystem::path bin = dir_ / "bin";
    std::filesystem::create_directories(bin);
    std::ofstream(bin / "python3") << "#!/bin/sh\nexec " << kPython << " \"$@\"\n";
    std::filesystem::permissions(bin / "python3", std::filesystem::perms::owner_all);
    const char* path = std::getenv("PATH");
    old_path_ = path != nullptr ? path : "/usr/bin:/bin";
    ::setenv("PATH", (bin.string() + ":" + old_path_).c_str(), 1);
  }
  void TearDown() override { ::setenv("PATH", old_path_.c_str(), 1); }
  static std::vector<std::string> Env() {
    return {"PYTHONPATH=" + std::string(DLAUNCH_PY_SCRIPTS)};
  }

  std::vector<std::string> Argv(Form form, const std::string& mode) {
    std::vector<std::string> a = {"--nproc",        "2", "--quiet", "--grace-period", "3",
                                  "--hang-timeout", "3"};
    const std::string script = Script("collectives.py");
    switch (form) {
      case Form::kScript:
        a.insert(a.end(), {script, mode});
        break;
      case Form::kPythonFlag:
        a.insert(a.end(), {"--python", kPython, script, mode});
        break;
      case Form::kDashDashPython:
        a.insert(a.end(), {"--", "python3", script, mode});
        break;
      case Form::kPython:
        a.insert(a.end(), {"python3", script, mode});
        break;
      case Form::kModule:
        a.insert(a.end(), {"-m", "dlaunch_test_pkg.faulty", mode});
        break;
      case Form::kRunPath:
        a.insert(a.end(), {"--run-path", Script("faulty_entry"), mode});
        break;
    }
    return Cmd(a, /*with_python=*/false);
  }

  std::string old_path_;
};

TEST_P(LaunchFormTest, TheFaultyRankIsNamed) {
  const Case c = GetParam();
  const std::string mode = c.fault == Fault::kHang       ? "sleep"
                           : c.fault == Fault::kMismatch ? "op"
                                                         : "oom";
  Launched l(Argv(c.form, mode), Env());
  const int code = l.Wait(seconds(90));
  const std::string err = l.err_text();
  ASSERT_EQ(code, c.fault == Fault::kOom ? 1 : 3) << err;
  const nlohmann::json d = Diagnosis();
  ASSERT_TRUE(d.is_object()) << err;
  EXPECT_EQ(d["culprit_ranks"], nlohmann::json::array({1})) << d.dump(2);
  switch (c.fault) {
    case Fault::kHang:
      EXPECT_EQ(d["kind"], "hang") << d.dump(2);
      EXPECT_THAT(d["trigger"].get<std::string>(), HasSubstr("rank 1 has not entered it"));
      EXPECT_THAT(ReadText(RankDir(1) / "py_stacks.txt"), HasSubstr("time.sleep(3600)"));
      break;
    case Fault::kMismatch:
      EXPECT_EQ(d["mismatch_type"], "COLLECTIVE_TYPE_MISMATCH") << d.dump(2);
      break;
    case Fault::kOom:
      EXPECT_THAT(err, HasSubstr("dlaunch: out of memory on rank 1"));
      EXPECT_EQ(ReadJson(RankDir(1) / "error.json")["kind"], "oom");
      break;
  }
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (Form f : {Form::kScript, Form::kPythonFlag, Form::kDashDashPython, Form::kPython,
                 Form::kModule, Form::kRunPath}) {
    for (Fault x : {Fault::kHang, Fault::kMismatch, Fault::kOom}) cases.push_back({f, x});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Forms, LaunchFormTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return FormName(info.param.form) + FaultName(info.param.fault);
                         });

}  // namespace
}  // namespace dlaunch::testing
