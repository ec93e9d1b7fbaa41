// Where a training rank's telemetry goes: events (rank<R>/events.jsonl and the coordinator),
// heartbeat status, rank<R>/error.json, and rank 0's console. Torch-free.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "worker/train/train.h"

namespace dlaunch::rundir {
class EventLog;
}

namespace dlaunch::worker {

// Per-rank totals gathered at the end for rank 0's table.
struct RankSummary {
  int rank = 0;
  // CUDA: the caching allocator's allocated / reserved / peak bytes; CPU: resident memory at the
  // end, -1 (no reserve), peak resident memory.
  double allocated_bytes = -1;
  double reserved_bytes = -1;
  double peak_bytes = -1;
  double comm_share = 0;  // communication wait / step time
  double samples_per_sec = 0;
  double step_ms_median = 0;
};

// "rank  allocated  reserved  peak  comm share  samples/s  step ms p50" table, one row per rank,
// plus a total line.
std::string FormatRankTable(const std::vector<RankSummary>& ranks, const std::string& device);

// "step 120/500  loss 0.4321  train acc 84.2%  4210 samples/s  slowest rank 2 (31.2 ms/step)";
// no accuracy when train_accuracy < 0.
std::string FormatProgressLine(int64_t step, int64_t total, double loss, double samples_per_sec,
                               int slowest_rank, double slowest_step_ms,
                               double train_accuracy = -1);

class TrainReporter {
 public:
  // Does not block. Without ctx.report_event, events go straight to rank_dir/events.jsonl.
  explicit TrainReporter(const TrainContext& ctx);
  ~TrainReporter();

  // Blocks for one event write (and the coordinator round trip when the launcher is there).
  void Event(const std::string& kind, const nlohmann::json& body);
  // Runs `task` on the reporter's own thread, in posting order, so that coordinator round trips
  // never stall a training step. Does not block.
  void Post(std::function<void()> task);
  // Blocks until every posted task has run.
  void Flush();
  // Does not block.
  void Status(const std::function<void(core::RankStatus&)>& update);
  // Writes rank_dir/error.json atomically ({"rank","kind","message","unix_ms",...details}) and the
  // matching event, after the posted tasks. Blocks for the writes.
  void Error(const std::string& kind, const std::string& message, const nlohmann::json& details);

 private:
  void Loop();

  const TrainContext& ctx_;
  std::unique_ptr<rundir::EventLog> log_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace dlaunch::worker
