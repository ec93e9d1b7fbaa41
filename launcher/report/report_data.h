// What the report page shows, read from a run directory and reduced to what a page can carry:
// every per-rank series is downsampled to at most kMaxPointsPerRank points, and many ranks
// become a band (min, median, max) plus the ranks that stand out. A pure value: the page is
// rendered from it (report_page.h), whether it came from a finished or a live run directory.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/run_dir/diagnosis_file.h"
#include "core/run_dir/summary_file.h"

namespace dlaunch::launcher::report {

// A rank's series keeps at most this many points; each point stands for a run of consecutive
// samples: the largest memory figures among them (so a peak is never smoothed away), the mean
// step time and comm share, and the time, step and loss of the last.
inline constexpr size_t kMaxPointsPerRank = 200;
// With more ranks than this, memory and step time are drawn as a band plus outlier lines.
inline constexpr int kMaxRankLines = 16;
// Outlier lines drawn over a band.
inline constexpr size_t kMaxOutliers = 8;
// A p2p matrix wider than this is drawn in blocks of ranks, each the slowest link in it.
inline constexpr int kMaxHeatmapCells = 64;

// One point of a rank's telemetry; -1 = unknown.
struct RankPoint {
  double t_s = 0;  // seconds since the run's start
  int64_t step = -1;
  double rss_mib = -1;
  double allocated_mib = -1;
  double reserved_mib = -1;
  double peak_mib = -1;
  double step_ms = -1;
  double comm_share = -1;  // comm_wait_ms / step_ms, 0..1
  double loss = -1;
  std::string phase;
};

struct RankSeries {
  int rank = 0;
  std::vector<RankPoint> points;  // downsampled, in time order
  double median_step_ms = -1;
  double mean_comm_share = -1;
  double peak_rss_mib = -1;
  double peak_device_mib = -1;  // the largest of allocated and peak
};

// A span of one phase on rank 0 (or the lowest rank with telemetry).
struct PhaseSpan {
  double start_s = 0;
  double end_s = 0;
  std::string phase;
};

// An instant on the timeline: an OOM, an error, a timeout, a checkpoint, an evaluation, an exit.
struct Marker {
  double t_s = 0;
  int rank = -1;
  std::string kind;
  std::string text;  // from the rank: escaped when drawn
};

struct EvalPoint {
  int64_t epoch = -1;
  int64_t step = -1;
  double test_accuracy = -1;
  double test_loss = -1;
};

// One busbw curve of the pre-flight sweep.
struct BusbwCurve {
  std::string op;
  bool in_place = false;
  std::vector<std::pair<double, double>> points;  // (bytes, GB/s)
};

struct Heatmap {
  std::string title;
  int size = 0;                            // ranks (or nodes) per side
  int block = 1;                           // ranks per cell
  std::vector<std::vector<double>> cells;  // GB/s, rows by source; -1 = none
  double median_gbps = -1;
  std::vector<std::pair<int, int>> slow;  // (src, dst) the suite flagged
  std::vector<std::string> slow_text;     // one line per flagged link or rank
};

struct AttemptSpan {
  int attempt = 0;
  double start_s = 0;
  double end_s = -1;  // -1 while it runs
  int exit_code = -1;
  std::string error;
  std::string next;
};

struct ReportSnapshot {
  std::string run_dir;
  std::string run_id;
  bool live = false;  // the launcher has not written an exit code yet
  int64_t start_unix_ms = 0;
  int64_t end_unix_ms = 0;  // the last thing seen
  int world_size = 0;
  int nodes = 0;
  std::optional<int> exit_code;
  std::string verdict;               // OK | FAILED | HANG | MISMATCH | RUNNING | INCOMPLETE
  std::string headline;              // the diagnosis headline or the summary's error
  std::vector<std::string> details;  // the diagnosis' details (root-cause block, ...)
  std::vector<std::pair<std::string, int>> status_counts;              // "ok" -> 3, "failed" -> 1
  std::vector<std::pair<int, std::vector<std::string>>> failed_tails;  // rank -> stderr tail

  std::vector<RankSeries> ranks;  // ranks with telemetry
  std::vector<PhaseSpan> phases;
  std::vector<Marker> markers;
  std::vector<EvalPoint> evals;
  // Memory per step phase (the trainer's "memory" events, lowest rank): phase -> (step, MiB).
  std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>> phase_memory;

  std::optional<std::string> preflight_verdict;
  std::vector<std::string> preflight_reasons;
  std::vector<BusbwCurve> busbw;
  std::optional<Heatmap> p2p;
  std::optional<Heatmap> node_matrix;

  std::vector<AttemptSpan> attempts;
  bool has_trace = false;
  std::string trace_href;  // trace.json, relative to the page when possible

  std::vector<std::string> problems;  // what is missing or unreadable, one sentence each
};

// Whether `path` looks like a run directory: it holds summary.json, a rank<R>/ folder,
// preflight.json or diagnosis.json. Blocks on one directory listing.
bool IsRunDir(const std::string& path);

// Reads a run directory (finished or still being written) into a snapshot. Blocks on file
// reads only; never throws for bad contents (they become `problems`); throws
// Error(kInvalidArgument) when `run_dir` is not a readable directory. `page_path` is where the
// page will be written, so that the trace link can be relative to it.
ReportSnapshot LoadReportSnapshot(const std::string& run_dir, const std::string& page_path = "");

// The downsampling (exposed for tests): at most `max_points`, as kMaxPointsPerRank says.
std::vector<RankPoint> Downsample(const std::vector<RankPoint>& points, size_t max_points);

}  // namespace dlaunch::launcher::report
