// Loads a fixture: a single log file, or a run directory of rank<R>/nccl.log files.
#pragma once

#include <filesystem>
#include <string>

#include "launcher/nccl_log/parser.h"

namespace dlaunch::launcher::nccl_log::testing {

inline std::string Fixture(const std::string& name) {
  return std::string(NCCL_LOG_FIXTURES) + "/" + name;
}

inline ParseResult LoadFixture(const std::string& name) {
  const std::string path = Fixture(name);
  if (std::filesystem::is_directory(path)) return ParseRankDirs(path);
  return ParseFiles({path});
}

}  // namespace dlaunch::launcher::nccl_log::testing
