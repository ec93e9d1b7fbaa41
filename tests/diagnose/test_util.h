// Fixture run directories for the diagnosis tests.
#pragma once

#include <string>

namespace dlaunch::launcher::testing {

// Path of a checked-in fixture run directory (read-only use).
std::string FixturePath(const std::string& name);

// A fresh temporary directory, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Copies fixture `name` into `dir`/run and returns that path, for tests that write into it.
std::string CopyFixture(const std::string& name, const TempDir& dir);

}  // namespace dlaunch::launcher::testing
