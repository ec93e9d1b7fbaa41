// `dlaunch diagnose <run-dir> [--json] [--trace]`: the hang/failure analysis, offline.
#pragma once

#include <boost/program_options.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dlaunch::launcher {

// Parses the words after "dlaunch <command>" with the `visible` options and one positional
// RUN_DIR (vm["run-dir"], when given) into `vm`. Returns the command's exit code when it ends
// here: 0 after printing the help for --help, 2 after a one-line usage error and the help on
// stderr; nullopt to go on. Never throws.
std::optional<int> ParseRunDirCommand(const std::vector<std::string>& args,
                                      const std::string& command,
                                      const boost::program_options::options_description& visible,
                                      boost::program_options::variables_map* vm);

// `args` are the words after "diagnose". Prints the report to stdout (JSON with --json) and,
// with --trace, writes <run-dir>/trace.json. Returns 0 when it produced a report (also one that
// names a hang or a failure, or a partial one), 2 for bad arguments or an unreadable directory.
// Blocks on file I/O only; never throws.
int RunDiagnoseCommand(const std::vector<std::string>& args);

}  // namespace dlaunch::launcher
