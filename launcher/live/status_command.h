// `dlaunch status [RUN_DIR | --endpoint HOST:PORT] [--json] [--watch [S]] [--timeout S]`: the
// live view of a running job, asked of node 0's coordinator (GetStatus). With RUN_DIR it finds
// the coordinator and a status token in the run directory's live.json (owner-only); with
// --endpoint the token comes from DLAUNCH_STATUS_TOKEN (the status token or the job token), else
// DLAUNCH_JOB_TOKEN. It reads the job and never changes it.
#pragma once

#include <string>
#include <vector>

namespace dlaunch::launcher {

// `args` are the words after "status". Prints the view (text, or the dlaunch.status/1 document
// with --json); with --watch redraws it in place every S seconds (2 by default) until the job
// ends (exit 0) or a signal ends it. Returns 0 once printed; 2, after one line on stderr, for bad
// arguments, a folder that is no run directory or not the caller's, a finished job ("job
// finished"), a wrong token, or no answer within --timeout. Blocks for one round trip per view
// (at most --timeout); never throws.
int RunStatusCommand(const std::vector<std::string>& args);

}  // namespace dlaunch::launcher
