// One function per plot of the report page. Each returns an HTML fragment: the plot's <svg>
// (data-plot names it) with a caption, or a sentence saying what the run directory lacks for it.
// Pure over the snapshot; never blocks.
#pragma once

#include <string>

#include "launcher/report/report_data.h"

namespace dlaunch::launcher::report {

// Host RSS and CUDA allocated/reserved/peak against time, phases shaded, OOMs, evaluations and
// checkpoints marked; a min-median-max band with outlier lines past kMaxRankLines ranks.
std::string MemoryPlot(const ReportSnapshot& run);
// Memory after each step phase (data, forward, backward, optimizer) against the step.
std::string PhaseMemoryPlot(const ReportSnapshot& run);
// Step time per rank against the step; slow ranks drawn in red.
std::string StepTimePlot(const ReportSnapshot& run);
// The share of each rank's step spent waiting for collectives, one bar per rank.
std::string CommSharePlot(const ReportSnapshot& run);
// Pre-flight busbw against message size (log x), out-of-place solid and in-place dashed.
std::string BusbwPlot(const ReportSnapshot& run);
// A p2p (or node) matrix as a heatmap, flagged links outlined.
std::string HeatmapPlot(const Heatmap& map, const std::string& id);
// Attempts, restarts, rank exits, node loss and rank events on one time axis.
std::string TimelinePlot(const ReportSnapshot& run);
// Training loss against the step, and test loss where evaluated.
std::string LossPlot(const ReportSnapshot& run);
// Test accuracy per epoch.
std::string AccuracyPlot(const ReportSnapshot& run);

// Ranks whose median step time is at least kSlowFactor times the job's median (the report's
// own reading until the run directory carries straggler verdicts). Exposed for tests.
inline constexpr double kSlowFactor = 1.2;
std::vector<int> SlowRanks(const ReportSnapshot& run);

}  // namespace dlaunch::launcher::report
