// `dlaunch report RUN_DIR [-o FILE.html]`: the run as one self-contained HTML page.
#pragma once

#include <string>
#include <vector>

namespace dlaunch::launcher {

// `args` are the words after "report". Writes the page (default RUN_DIR/report.html) atomically
// and prints its path. Returns 0 when it wrote a page (also one that says what is missing), 2 for
// bad arguments, a path that is not a run directory, or a page it could not write. Blocks on
// file I/O only; never throws.
int RunReportCommand(const std::vector<std::string>& args);

}  // namespace dlaunch::launcher
