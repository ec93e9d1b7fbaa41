// `dlaunch diagnose <run-dir> [--json] [--trace]`: the hang/failure analysis, offline.
#pragma once

#include <string>
#include <vector>

namespace dlaunch::launcher {

// `args` are the words after "diagnose". Prints the report to stdout (JSON with --json) and,
// with --trace, writes <run-dir>/trace.json. Returns 0 when it produced a report (also one that
// names a hang or a failure, or a partial one), 2 for bad arguments or an unreadable directory.
// Blocks on file I/O only; never throws.
int RunDiagnoseCommand(const std::vector<std::string>& args);

}  // namespace dlaunch::launcher
