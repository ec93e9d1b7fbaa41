// The program every rank runs, found and checked before anything starts.
#pragma once

#include <string>
#include <vector>

#include "launcher/options.h"

namespace dlaunch::launcher {

// Finds `program` as execvp would (PATH lookup when it has no '/'). Throws UsageError when it is
// missing or not executable, or is a script whose #! interpreter is. Blocks for reading the
// file's first bytes.
std::string ResolveProgram(const std::string& program);

// argv of each rank: the built-in worker for train and preflight (their arguments checked), a
// Python entry (.py unless --no-python, -m, --run-path) under its interpreter
// (launcher/python/python_launch.h; says which on stderr; it must run Python), else the program
// as found. Throws UsageError. Blocks for short interpreter runs of a Python entry.
std::vector<std::string> RankArgv(const LaunchOptions& options, const std::string& self_exe);

}  // namespace dlaunch::launcher
