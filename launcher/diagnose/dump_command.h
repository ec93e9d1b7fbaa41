// `dlaunch dump RUN_DIR [--json] [--timeout S]`: a dump of every rank of the job running in
// RUN_DIR, while it goes on (live_dump.h), asked of node 0's launcher through the run directory.
#pragma once

#include <string>
#include <vector>

namespace dlaunch::launcher {

// `args` are the words after "dump". Asks the launcher for a dump (dumps/<name>/request.json),
// waits for it and prints where the ranks stand and the diagnosis (dump.json with --json).
// Returns 0 once the dump is written; 2, after one line on stderr, for bad arguments, a folder that
// is no run directory or not the caller's, a job that has ended, or no answer within --timeout.
// Blocks for the dump (a few seconds), at most --timeout; never throws.
int RunDumpCommand(const std::vector<std::string>& args);

}  // namespace dlaunch::launcher
