// The rank agent's loading in real torch scripts: under every PYTHONPATH (inherited, --env, both)
// beside the user's own sitecustomize and usercustomize, which still run as Python runs them; one
// console line when it cannot load; and a rank's forked children, which must leave the rank's
// files alone.
#include <gmock/gmock.h>

#include <regex>

#include "python_test_util.h"

namespace dlaunch::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

class PythonAgentLoadTest : public PythonJobTest {
 protected:
  static std::string UserSite() { return std::string(DLAUNCH_PY_FIXTURES) + "/user_site"; }
  static bool UserSiteEnabled() {
    return std::system(
               (kPython + " -c 'import site, sys; sys.exit(not site.ENABLE_USER_SITE)'").c_str()) ==
           0;
  }

  // agent_load.py on 2 ranks; `launcher_env` is dlaunch's own environment beside the markers
  // folder, `args` go before the script.
  void RunAgentLoad(std::vector<std::string> launcher_env, std::vector<std::string> args) {
    const fs::path markers = dir_ / "markers";
    fs::create_directories(markers);
    launcher_env.push_back("USER_SITE_MARKERS=" + markers.string());
    args.insert(args.begin(), {"--nproc", "2", "--quiet"});
    args.push_back(Script("agent_load.py"));
    Launched l(Cmd(args), launcher_env);
    ASSERT_EQ(l.Wait(seconds(100)), 0) << l.err_text();
    for (int r = 0; r < 2; ++r) {
      const std::string out = ReadText(RankDir(r) / "stdout.log");
      std::smatch m;
      ASSERT_TRUE(
          std::regex_search(out, m, std::regex(R"(pid (\d+) agent (\S+) sitecustomize (\S+))")))
          << out << l.err_text();
      EXPECT_EQ(m[2], "True") << "rank " << r;
      // `import sitecustomize` finds the user's module, not dlaunch's.
      EXPECT_EQ(m[3], UserSite() + "/sitecustomize.py") << "rank " << r;
      // Each ran in the rank's own process, under its own name and file, found in sys.modules;
      // usercustomize only where Python runs it (not in a virtualenv, nor under -s).
      for (const char* name : {"sitecustomize", "usercustomize"}) {
        if (std::string(name) == "usercustomize" && !UserSiteEnabled()) continue;
        const fs::path marker = markers / (std::string(name) + "." + m[1].str());
        EXPECT_EQ(ReadText(marker),
                  std::string(name) + " " + UserSite() + "/" + name + ".py True\n")
            << marker;
      }
      // And the agent ran beside them.
      EXPECT_EQ(ReadJson(RankDir(r) / "heartbeat.json").value("schema", ""), "dlaunch.heartbeat/1")
          << "rank " << r;
      const nlohmann::json flight = ReadJson(RankDir(r) / "flight.json");
      ASSERT_TRUE(flight.is_object()) << "rank " << r;
      EXPECT_EQ(flight["entries"][0]["op"], "allreduce");
    }
    EXPECT_THAT(l.err_text(), Not(HasSubstr("Python rank agent")));
  }
};

TEST_F(PythonAgentLoadTest, LoadsWithAnInheritedPythonPath) {
  RunAgentLoad({"PYTHONPATH=" + UserSite()}, {});
}

TEST_F(PythonAgentLoadTest, LoadsWithEnvPythonPath) {
  RunAgentLoad({}, {"--env", "PYTHONPATH=" + UserSite()});
}

TEST_F(PythonAgentLoadTest, LoadsWithEnvPythonPathOverAnInheritedOne) {
  RunAgentLoad({"PYTHONPATH=" + (dir_ / "elsewhere").string()},
               {"--env", "PYTHONPATH=" + UserSite()});
}

// An interpreter run with -S never imports sitecustomize: the launcher says so once, for both
// ranks, and the job goes on.
TEST_F(PythonAgentLoadTest, SaysOnceWhenTheAgentDidNotLoad) {
  const fs::path no_site = dir_ / "python-no-site";
  std::ofstream(no_site) << "#!/bin/sh\nexec " << kPython << " -S \"$@\"\n";
  fs::permissions(no_site, fs::perms::owner_all);
  Launched l(
      Cmd({"--python", no_site.string(), "--nproc", "2", "-m", "dlaunch_test_pkg.hello"}, false),
      {"PYTHONPATH=" + std::string(DLAUNCH_PY_SCRIPTS)});
  ASSERT_EQ(l.Wait(seconds(60)), 0) << l.err_text();
  const std::string err = l.err_text();
  // The ranks found without it when the first one ended: one or both.
  EXPECT_TRUE(std::regex_search(
      err, std::regex(R"(dlaunch: the Python rank agent did not load in (rank [01]|ranks 0,1) )"
                      R"(\(no heartbeat\.json; python -S or -I\?\): its hangs, errors and )"
                      R"(flight recorder are seen only from outside)")))
      << err;
  EXPECT_EQ(err.find("Python rank agent"), err.rfind("Python rank agent")) << err;
}

// A child forked by the rank inherits the agent but is not the rank: its exception, its exit and
// a signal sent to it leave the rank's files and the rank itself alone.
TEST_F(PythonAgentLoadTest, AForkedChildLeavesTheRanksFilesAlone) {
  Launched l(Cmd({"--nproc", "1", "--quiet", Script("fork_child.py"), "ok"}));
  ASSERT_EQ(l.Wait(seconds(100)), 0) << l.err_text();
  const std::string out = ReadText(RankDir(0) / "stdout.log");
  EXPECT_THAT(out, HasSubstr("child 1\nchild -15\n"));  // SIGTERM ended the child, not the rank
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(parent (\d+) done)"))) << out;
  EXPECT_FALSE(fs::exists(RankDir(0) / "error.json"));
  // The child's traceback still reached its stderr.
  EXPECT_THAT(ReadText(RankDir(0) / "stderr.log"), HasSubstr("ValueError: the child's own error"));
  const nlohmann::json beat = ReadJson(RankDir(0) / "heartbeat.json");
  EXPECT_EQ(beat.value("pid", 0), std::stoi(m[1].str()));
  EXPECT_EQ(beat.value("phase", ""), "done");
  EXPECT_EQ(ReadJson(RankDir(0) / "flight.json")["entries"].size(), 1u);
}

TEST_F(PythonAgentLoadTest, ARankThatFailsKeepsItsOwnErrorWhenItsChildFailsAfterIt) {
  Launched l(Cmd({"--nproc", "1", "--quiet", Script("fork_child.py"), "fail"}));
  ASSERT_EQ(l.Wait(seconds(100)), 1) << l.err_text();
  const nlohmann::json error = ReadJson(RankDir(0) / "error.json");
  EXPECT_EQ(error.value("message", ""), "RuntimeError: the parent's own error") << error.dump();
}

}  // namespace
}  // namespace dlaunch::testing
