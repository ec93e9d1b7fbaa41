// Bad command lines through a real launcher (issue 42, item 6): each ends dlaunch with exit code
// 2 and a one-line message saying what is wrong, at once, before any rank starts and before the
// log directory (and so the run directory) exists. These used to hang until the join timeout,
// start the ranks, or say something misleading.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "process_harness.h"
#include "tests/common/test_dir.h"

namespace dlaunch::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

// Long enough for a slow machine to start dlaunch and parse; far below any join timeout.
constexpr seconds kQuick{20};
const std::string kToken = "DLAUNCH_JOB_TOKEN=0123456789abcdef0123";

class BadInputProcessTest : public ::testing::Test {
 protected:
  // dlaunch --log-dir <tmp>/logs --run-id <run> <args...>
  std::vector<std::string> Cmd(std::vector<std::string> args, const std::string& run = "bad") {
    std::vector<std::string> argv = {DLAUNCH_BIN, "--log-dir", logs_.string(), "--run-id", run};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  // Runs `argv` and expects exit code 2 within kQuick, `message` on one "dlaunch: " line of
  // stderr, and no log directory.
  void ExpectRefused(const std::vector<std::string>& argv, const std::string& message,
                     const std::vector<std::string>& env = {}) {
    Launched l(argv, env);
    EXPECT_EQ(l.Wait(kQuick), 2) << message << "\n" << l.err_text();
    bool said = false;
    for (const std::string& line : l.err_lines) {
      said = said || (line.rfind("dlaunch: ", 0) == 0 && line.find(message) != std::string::npos);
    }
    EXPECT_TRUE(said) << "expected '" << message << "' in:\n" << l.err_text();
    EXPECT_FALSE(fs::exists(logs_)) << message << ": the log directory was made";
    fs::remove_all(logs_);
  }
  // An executable file `name` in the test's directory holding `text`.
  std::string Script(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), 0755);
    return path.string();
  }
  const TestDir test_dir_{"badinput"};
  const fs::path dir_ = test_dir_.path();
  const fs::path logs_ = dir_ / "logs";
};

// A joining node used to retry a malformed endpoint until the join timeout (305 s for "[::1"),
// and an unknown host name the same, without saying it does not resolve.
TEST_F(BadInputProcessTest, AJoiningNodeRefusesABadEndpointAtOnce) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[::1", "--rdzv-endpoint '[::1' is not host:port: the '[' of an IPv6 address has no ']'"},
      {"[x]:5", "--rdzv-endpoint '[x]:5' is not host:port: 'x' in brackets is not an IPv6"},
      {"a:b:c:1", "--rdzv-endpoint 'a:b:c:1' is not host:port: more than one ':'"},
      {"no-such-host.invalid:29400", "cannot resolve host 'no-such-host.invalid'"},
  };
  for (const auto& [endpoint, message] : cases) {
    ExpectRefused(Cmd({"--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", endpoint,
                       "--rdzv-timeout", "600", "--", "/bin/true"}),
                  message, {kToken});
  }
}

// execve failed in every rank (exit 2 after the fork, a run directory left behind).
TEST_F(BadInputProcessTest, AScriptWhoseInterpreterIsMissing) {
  const std::string missing = Script("missing.sh", "#!/nonexistent/dlaunch-sh\necho started\n");
  ExpectRefused(Cmd({"--nproc", "2", missing}),
                "program '" + missing +
                    "': its #! interpreter '/nonexistent/dlaunch-sh' does not " + "exist");
  const std::string by_env =
      Script("by_env.sh", "#!/usr/bin/env dlaunch-no-such-interpreter\necho started\n");
  ExpectRefused(Cmd({by_env}), "its #! line runs 'dlaunch-no-such-interpreter' through " +
                                   std::string("/usr/bin/env, and no executable"));
  const std::string dos = Script("dos.sh", "#!/bin/sh\r\necho started\r\n");
  ExpectRefused(Cmd({dos}), "has Windows line endings");
}

// --python /bin/false used to start the ranks, which exited 1.
TEST_F(BadInputProcessTest, AnInterpreterThatIsNotPython) {
  const std::string script = dir_ / "train.py";
  std::ofstream(script) << "print('started')\n";
  ExpectRefused(Cmd({"--python", "/bin/false", script}),
                "Python interpreter /bin/false (from --python) does not run Python: -c 'import "
                "sys' exited with 1");
  ExpectRefused(Cmd({"-m", "json.tool"}),
                "Python interpreter /bin/true (from PYTHON_EXEC) is not Python 3",
                {"PYTHON_EXEC=/bin/true"});
}

// --token-file was read on many nodes only: a wrong one passed unnoticed on one node (exit 0), and
// a directory read as an empty (too short) token.
TEST_F(BadInputProcessTest, ATokenFileThatCannotBeRead) {
  ExpectRefused(Cmd({"--token-file", "/nonexistent/token", "--", "/bin/true"}),
                "cannot read --token-file '/nonexistent/token': No such file or directory");
  ExpectRefused(Cmd({"--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "127.0.0.1:1",
                     "--token-file", dir_.string(), "--", "/bin/true"}),
                "--token-file '" + dir_.string() + "' is a directory");
}

// PET_NPROC_PER_NODE="" was taken as unset.
TEST_F(BadInputProcessTest, AnEmptyPetVariable) {
  ExpectRefused(Cmd({"--", "/bin/true"}),
                "PET_NPROC_PER_NODE is set but empty: give it a value, or unset it",
                {"PET_NPROC_PER_NODE="});
}

// An empty program name used to be reported as "program '/usr/local/bin/' is a directory", and
// --run-id .. as "must not contain '/'".
TEST_F(BadInputProcessTest, AnEmptyProgramNameAndRunIdsThatAreNotAFolderName) {
  ExpectRefused(Cmd({"--nproc", "2", ""}), "the program name is empty");
  ExpectRefused(Cmd({"--", "/bin/true"}, ".."), "--run-id '..' is not a folder name of its own");
  ExpectRefused(Cmd({"--", "/bin/true"}, "."), "--run-id '.' is not a folder name of its own");
  ExpectRefused(Cmd({"--", "/bin/true"}, "a/b"), "--run-id 'a/b' holds a '/'");
}

}  // namespace
}  // namespace dlaunch::testing
