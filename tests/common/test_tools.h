// The outside programs some tests drive (promtool, prometheus, chromium), found on PATH when the
// test runs, not when CMake configures: installing one after the build is enough for its test.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace dlaunch::testing {

// The first executable of `names` in PATH's folders (then /usr/bin and /usr/sbin); "" when none
// is there. Blocks for a few access(2) calls.
inline std::string FindTestTool(const std::vector<std::string>& names) {
  const char* env = std::getenv("PATH");
  std::string folders = (env != nullptr ? std::string(env) + ":" : "") + "/usr/bin:/usr/sbin";
  std::stringstream in(folders);
  std::vector<std::string> dirs;
  for (std::string d; std::getline(in, d, ':');)
    if (!d.empty()) dirs.push_back(d);
  for (const std::string& name : names) {
    for (const std::string& d : dirs) {
      const std::string path = d + "/" + name;
      if (::access(path.c_str(), X_OK) == 0) return path;
    }
  }
  return "";
}

// Under CI (CI=true, as .ci/run is started) a missing tool is a failure, since `make test`
// installs every one of them; elsewhere its test is skipped with the install hint.
inline bool TestToolsRequired() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

}  // namespace dlaunch::testing

// In a test body: `tool` is found, or the test fails (CI) or is skipped, naming `hint`.
#define DLAUNCH_REQUIRE_TOOL(tool, what, hint)                   \
  do {                                                           \
    if ((tool).empty()) {                                        \
      if (::dlaunch::testing::TestToolsRequired())               \
        FAIL() << what << " not found (" << hint << ")";         \
      GTEST_SKIP() << what << " not installed (" << hint << ")"; \
    }                                                            \
  } while (0)
