// A scratch directory for one GoogleTest test.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "gtest/gtest.h"

namespace dlaunch::testing {

// <tmp>/dlaunch-<prefix>-<pid>-<Suite>.<Test>[-<n>]: named after the running test so that a kept
// directory says which test left it, and after the pid so that concurrent ctest runs of one binary
// never share it. A second TestDir in the same test gets a "-<n>" suffix. The directory is emptied
// and created on construction and removed on destruction, unless the environment sets
// DLAUNCH_KEEP_TEST_DIRS to a non-empty value: then it stays for reading after a failure.
class TestDir {
 public:
  explicit TestDir(const std::string& prefix) : path_(Name(prefix)), string_(path_.string()) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TestDir() {
    const char* keep = std::getenv("DLAUNCH_KEEP_TEST_DIRS");
    if (keep != nullptr && *keep != '\0') return;
    std::error_code ec;  // a destructor must not throw; a leftover directory is harmless
    std::filesystem::remove_all(path_, ec);
  }
  TestDir(const TestDir&) = delete;
  TestDir& operator=(const TestDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::string& string() const { return string_; }

 private:
  static std::filesystem::path Name(const std::string& prefix) {
    static int made = 0;  // TestDirs made by this process, for the suffix
    static std::string last_test;
    std::string test = "no-test";
    if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
      test = std::string(info->test_suite_name()) + "." + info->name();
    }
    if (test != last_test) made = 0;
    last_test = test;
    ++made;
    for (char& c : test) {
      if (c == '/') c = '_';  // parameterised names ("Suite/0") must stay one path component
    }
    std::string name = "dlaunch-" + prefix + "-" + std::to_string(::getpid()) + "-" + test;
    if (made > 1) name += "-" + std::to_string(made);
    return std::filesystem::temp_directory_path() / name;
  }

  std::filesystem::path path_;
  std::string string_;
};

}  // namespace dlaunch::testing
