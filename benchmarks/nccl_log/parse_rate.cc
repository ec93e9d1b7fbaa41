// How fast a large NCCL log is read: lines only (the I/O and line-splitting floor), the full
// parse into ranks, and parse + verdicts + matrix. The log (NCCL_LOG_BENCH_FILE, default
// /tmp/dlaunch-nccl-bench.log) is generated once at 100 MB by the same generator the size test
// uses; it is read from the page cache, so the figures are CPU cost, not disk speed.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "launcher/nccl_log/parser.h"
#include "launcher/nccl_log/report.h"
#include "tests/nccl_log/large_log.h"

namespace nl = dlaunch::launcher::nccl_log;

namespace {

constexpr int64_t kBytes = 100 << 20;

const std::string& LogPath() {
  static const std::string path = [] {
    const char* env = std::getenv("NCCL_LOG_BENCH_FILE");
    std::string p = env && *env ? env : "/tmp/dlaunch-nccl-bench.log";
    std::error_code ec;
    if (std::filesystem::file_size(p, ec) < static_cast<uintmax_t>(kBytes) || ec) {
      nl::testing::WriteLargeNcclLog(p, kBytes);
    }
    return p;
  }();
  return path;
}

double PeakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

void BM_ReadLines(benchmark::State& state) {
  const std::string& path = LogPath();
  int64_t bytes = 0;
  for (auto _ : state) {
    int64_t lines = 0;
    std::string error;
    nl::ReadLines(
        path, [&](std::string_view) { ++lines; }, &bytes, &error);
    benchmark::DoNotOptimize(lines);
  }
  state.SetBytesProcessed(bytes);
}

void BM_Parse(benchmark::State& state) {
  const std::string& path = LogPath();
  int64_t bytes = 0;
  size_t ranks = 0;
  for (auto _ : state) {
    nl::ParseResult p = nl::ParseFiles({path});
    bytes += p.bytes;
    ranks = p.ranks.size();
  }
  state.SetBytesProcessed(bytes);
  state.counters["ranks"] = static_cast<double>(ranks);
  state.counters["peak_rss_MiB"] = PeakRssMiB();
}

void BM_ParseAndAnalyze(benchmark::State& state) {
  const std::string& path = LogPath();
  int64_t bytes = 0;
  for (auto _ : state) {
    nl::NcclReport r = nl::Analyze(nl::ParseFiles({path}));
    bytes += r.parsed.bytes;
    benchmark::DoNotOptimize(r.verdicts.size());
  }
  state.SetBytesProcessed(bytes);
  state.counters["peak_rss_MiB"] = PeakRssMiB();
}

BENCHMARK(BM_ReadLines)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Parse)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ParseAndAnalyze)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
