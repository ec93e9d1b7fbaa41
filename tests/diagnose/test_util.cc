#include "tests/diagnose/test_util.h"

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>

namespace dlaunch::launcher::testing {

namespace fs = std::filesystem;

std::string FixturePath(const std::string& name) {
  return std::string(DLAUNCH_DIAGNOSE_FIXTURES) + "/" + name;
}

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "dlaunch-diagnose-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string CopyFixture(const std::string& name, const TempDir& dir) {
  const std::string to = dir.path() + "/run";
  fs::copy(FixturePath(name), to, fs::copy_options::recursive);
  return to;
}

}  // namespace dlaunch::launcher::testing
