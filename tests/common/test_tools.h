// The outside programs some tests drive (promtool, prometheus, chromium), found on PATH when the
// test runs, not when CMake configures: installing one after the build is enough for its test.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "core/base/files.h"

namespace dlaunch::testing {

// The first of `names` that PATH finds (base::FindExecutable), then /usr/bin or /usr/sbin; ""
// when none is there. Blocks for a few stat(2) calls.
inline std::string FindTestTool(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    for (const std::string& found :
         {base::FindExecutable(name), base::FindExecutable("/usr/bin/" + name),
          base::FindExecutable("/usr/sbin/" + name)}) {
      if (!found.empty()) return found;
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
