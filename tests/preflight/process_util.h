// Helpers of the preflight tests that run the real launcher as a command.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace dlaunch::testing {

// The exit code of a shell command; -1 when it did not exit normally.
inline int RunCommand(const std::string& command) {
  int status = std::system(command.c_str());
  if (status == -1 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// The binary of this build, or the one the environment variable `env` names.
inline std::string Binary(const char* env, const char* built) {
  const char* v = std::getenv(env);
  return v && *v ? v : built;
}

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace dlaunch::testing
