#include "tests/report/report_fixture.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/run_dir/events_file.h"
#include "core/run_dir/paths.h"
#include "core/run_dir/report_files.h"
#include "core/run_dir/summary_file.h"

namespace dlaunch::testing {

using nlohmann::json;

void WriteFixtureRun(const std::string& dir) {
  namespace fs = std::filesystem;
  const rundir::RunDir run(dir);
  const int64_t t0 = 1764450000000;
  rundir::Summary summary;
  summary.run_id = "fixture-run";
  summary.host = "host-a";
  summary.exit_code = 1;
  summary.updated_unix_ms = t0 + 40000;
  summary.error = std::string("rank 2 ran out of memory: ") + kHostileLine;
  for (int r = 0; r < kFixtureRanks; ++r) {
    fs::create_directories(run.rank(r).path());
    rundir::SummaryRank rank;
    rank.rank = r;
    rank.local_rank = r;
    rank.host = "host-a";
    rank.pid = 1000 + r;
    rank.status = r == 2 ? rundir::RankStatus::kFailed : rundir::RankStatus::kKilled;
    rank.start_unix_ms = t0;
    rank.end_unix_ms = t0 + 31000;
    rank.exit_code = r == 2 ? 1 : -15;
    rank.signal = r == 2 ? 0 : 15;
    summary.ranks.push_back(rank);

    rundir::EventLog log(run.rank(r).events());
    for (int s = 1; s <= kFixtureSteps; ++s) {
      rundir::TelemetrySample t;
      t.step = s;
      t.total_steps = kFixtureSteps;
      t.loss = 2.0 / s;
      t.phase = s % 3 == 0 ? "forward" : s % 3 == 1 ? "backward" : "optimizer";
      // Rank 3 climbs to kPeakRssMib at its last step; the others stay at 200-299 MiB.
      const double mib = r == 3 ? 100 + (kPeakRssMib - 100) * s / kFixtureSteps : 200 + s % 100;
      t.rss_bytes = static_cast<int64_t>(mib * 1048576);
      t.step_ms = r == 1 ? kSlowStepMs : kStepMs;
      t.comm_wait_ms = t.step_ms * (0.1 + 0.05 * r);
      log.Append(t0 + s * 100, r, "telemetry", rundir::TelemetryToJson(t));
      if (r == 0 && s % 100 == 0) {
        json phases = json::object();
        for (const char* p : {"data", "forward", "backward", "optimizer"}) {
          rundir::MemoryFigures m;
          m.rss_bytes = (300 + s / 10 + (p[0] == 'b' ? 50 : 0)) * 1048576LL;
          phases[p] = rundir::MemoryFiguresJson(m);
        }
        log.Append(t0 + s * 100, r, "memory", {{"step", s}, {"phases", phases}});
        log.Append(t0 + s * 100 + 10, r, "eval",
                   {{"epoch", s / 100},
                    {"step", s},
                    {"test_accuracy", 0.5 + 0.1 * s / 100},
                    {"test_loss", 1.0 / s}});
      }
    }
    if (r == 2) {
      log.Append(t0 + 30500, r, "oom",
                 {{"message", std::string("CUDA out of memory ") + kHostileLine}});
    }
  }
  rundir::WriteSummary(run.summary(), summary);
  std::ofstream(run.rank(2).stderr_log()) << "starting\n" << kHostileLine << "\n";

  json ops = json::array();
  for (const char* op : {"allreduce", "allgather"}) {
    json rows = json::array();
    for (double size = kMinSizeBytes; size <= kMaxSizeBytes; size *= 4) {
      const double bw = kMaxBusbwGbps * size / kMaxSizeBytes * (op[3] == 'r' ? 1 : 0.5);
      rows.push_back({{"size", size},
                      {"count", size / 4},
                      {"type", "float"},
                      {"busbw_gbps", bw},
                      {"algbw_gbps", bw},
                      {"in_place", {{"busbw_gbps", bw * 0.9}}}});
    }
    ops.push_back({{"op", op}, {"rows", rows}});
  }
  json matrix = json::array();
  for (int i = 0; i < kFixtureRanks; ++i) {
    json row = json::array();
    for (int j = 0; j < kFixtureRanks; ++j)
      row.push_back(i == j ? 0.0 : (i == 1 && j == 2 ? 1.0 : 10.0));
    matrix.push_back(row);
  }
  rundir::WritePreflight(run.preflight(),
                         {{"verdict", "FAIL"},
                          {"reasons", {"link 1 -> 2 is slow: 1 GB/s against a median of 10 GB/s"}},
                          {"world_size", kFixtureRanks},
                          {"backend", "gloo"},
                          {"unix_ms", t0},
                          {"bandwidth", ops},
                          {"p2p",
                           {{"matrix_gbps", matrix},
                            {"median_gbps", 10.0},
                            {"slow_links", {{{"src", 1}, {"dst", 2}, {"gbps", 1.0}}}},
                            {"slow_ranks", json::array()}}}});
}

}  // namespace dlaunch::testing
