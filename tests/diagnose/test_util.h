// Fixture run directories for the diagnosis tests.
#pragma once

#include <string>

#include "tests/common/test_dir.h"

namespace dlaunch::launcher::testing {

// Path of a checked-in fixture run directory (read-only use).
std::string FixturePath(const std::string& name);

using ::dlaunch::testing::TestDir;

// Copies fixture `name` into `dir`/run and returns that path, for tests that write into it.
std::string CopyFixture(const std::string& name, const TestDir& dir);

}  // namespace dlaunch::launcher::testing
