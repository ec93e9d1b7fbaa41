#include "tests/diagnose/test_util.h"

#include <filesystem>

namespace dlaunch::launcher::testing {

namespace fs = std::filesystem;

std::string FixturePath(const std::string& name) {
  return std::string(DLAUNCH_DIAGNOSE_FIXTURES) + "/" + name;
}

std::string CopyFixture(const std::string& name, const TestDir& dir) {
  const std::string to = dir.string() + "/run";
  fs::copy(FixturePath(name), to, fs::copy_options::recursive);
  return to;
}

}  // namespace dlaunch::launcher::testing
