// The report page: one self-contained HTML document (inline CSS and SVG, a few lines of inline
// script, no network, no fonts) that opens from disk after scp. This module owns the page;
// plots.h draws each plot. The same function serves a finished and a live run directory.
#pragma once

#include <string>

#include "launcher/report/report_data.h"

namespace dlaunch::launcher::report {

struct PageOptions {
  // > 0: the page reloads itself every this many seconds (the live page at node 0's `/`).
  int refresh_s = 0;
};

// The whole page. Pure: does not block, does not throw for any snapshot contents; every string
// taken from the run directory is escaped.
std::string RenderReportPage(const ReportSnapshot& run, const PageOptions& options = {});

}  // namespace dlaunch::launcher::report
