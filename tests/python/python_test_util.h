// dlaunch running real Python ranks under /usr/bin/python3 (Debian's, with torch 1.13), or the
// torch 2.x venv's python where DLAUNCH_TEST_PYTHON names it (the "torch2" registration of
// tests/python/CMakeLists.txt): a temp folder per test, the launcher as a child process, the run
// directory's files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "process_harness.h"
#include "tests/common/test_dir.h"

namespace dlaunch::testing {

// The ranks' interpreter. Does not block.
inline std::string TestPython() {
  const char* p = std::getenv("DLAUNCH_TEST_PYTHON");
  return p != nullptr && *p != '\0' ? p : "/usr/bin/python3";
}

class PythonJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(kPython.c_str(), X_OK) != 0 ||
        std::system((kPython + " -c 'import torch.distributed' >/dev/null 2>&1").c_str()) != 0) {
      GTEST_SKIP() << kPython << " with torch is not available ("
                   << (std::getenv("DLAUNCH_TEST_PYTHON") ? "make torch2"
                                                          : "apt-get install python3-torch")
                   << ")";
    }
  }

  // dlaunch --log-dir <tmp> --run-id run --python /usr/bin/python3 <args...>
  std::vector<std::string> Cmd(std::vector<std::string> args, bool with_python = true) {
    std::vector<std::string> argv = {DLAUNCH_BIN, "--log-dir", (dir_ / "logs").string(), "--run-id",
                                     "run"};
    if (with_python) argv.insert(argv.end(), {"--python", kPython});
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  // Scripts import the dlaunch package, found on PYTHONPATH inside a job.
  static std::string Script(const std::string& name) {
    return std::string(DLAUNCH_PY_SCRIPTS) + "/" + name;
  }
  std::filesystem::path RunDir() const { return dir_ / "logs" / "run"; }
  std::filesystem::path RankDir(int r) const { return RunDir() / ("rank" + std::to_string(r)); }
  static std::string ReadText(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static nlohmann::json ReadJson(const std::filesystem::path& p) {
    return nlohmann::json::parse(ReadText(p), nullptr, false);
  }
  nlohmann::json Diagnosis() const { return ReadJson(RunDir() / "diagnosis.json"); }

  inline static const std::string kPython = TestPython();
  const TestDir test_dir_{"py"};
  const std::filesystem::path dir_ = test_dir_.path();
};

}  // namespace dlaunch::testing
