#include "worker/train/train_reporter.h"

#include <cstdio>
#include <sstream>

#include "core/base/clock.h"
#include "core/base/files.h"
#include "core/base/format.h"
#include "core/run_dir/error_file.h"
#include "core/run_dir/events_file.h"
#include "core/run_dir/paths.h"

namespace dlaunch::worker {
namespace {

std::string Bytes(double b) {
  return b < 0 ? "n/a" : base::FormatBytes(static_cast<int64_t>(b), base::ByteStyle::kOneDecimal);
}

}  // namespace

std::string FormatRankTable(const std::vector<RankSummary>& ranks, const std::string& device) {
  std::ostringstream out;
  char line[200];
  const bool cuda = device == "cuda";
  std::snprintf(line, sizeof line, "%-6s %12s %12s %12s %11s %12s %12s\n", "rank",
                cuda ? "allocated" : "rss", "reserved", cuda ? "peak" : "peak rss", "comm share",
                "samples/s", "step ms p50");
  out << line;
  double total = 0;
  for (const RankSummary& r : ranks) {
    std::snprintf(line, sizeof line, "%-6d %12s %12s %12s %10.1f%% %12.1f %12.2f\n", r.rank,
                  Bytes(r.allocated_bytes).c_str(), Bytes(r.reserved_bytes).c_str(),
                  Bytes(r.peak_bytes).c_str(), 100.0 * r.comm_share, r.samples_per_sec,
                  r.step_ms_median);
    out << line;
    total += r.samples_per_sec;
  }
  std::snprintf(line, sizeof line, "%-6s %12s %12s %12s %11s %12.1f\n", "all", "", "", "", "",
                total);
  out << line;
  return out.str();
}

std::string FormatProgressLine(int64_t step, int64_t total, double loss, double samples_per_sec,
                               int slowest_rank, double slowest_step_ms, double train_accuracy) {
  char line[240];
  int n = std::snprintf(line, sizeof line, "step %lld/%lld  loss %.4f",
                        static_cast<long long>(step), static_cast<long long>(total), loss);
  auto append = [&](const char* fmt, auto... args) {
    if (n > 0 && static_cast<size_t>(n) < sizeof line) {
      n += std::snprintf(line + n, sizeof line - n, fmt, args...);
    }
  };
  if (train_accuracy >= 0) append("  train acc %.1f%%", 100 * train_accuracy);
  append("  %.0f samples/s", samples_per_sec);
  if (slowest_rank >= 0) append("  slowest rank %d (%.1f ms/step)", slowest_rank, slowest_step_ms);
  return line;
}

TrainReporter::TrainReporter(const TrainContext& ctx) : ctx_(ctx) {
  if (!ctx_.report_event && !ctx_.rank_dir.empty()) {
    log_ = std::make_unique<rundir::EventLog>(rundir::RankDir(ctx_.rank_dir).events());
  }
  thread_ = std::thread([this] { Loop(); });
}

TrainReporter::~TrainReporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // runs what is still queued first
}

void TrainReporter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stop_ and drained
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      task();
    } catch (const std::exception& e) {
      // Telemetry must never end a training run.
      std::fprintf(stderr, "rank %d: telemetry: %s\n", ctx_.rank, e.what());
    }
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void TrainReporter::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_all();
}

void TrainReporter::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return tasks_.empty() && !busy_; });
}

void TrainReporter::Event(const std::string& kind, const nlohmann::json& body) {
  if (ctx_.report_event) {
    ctx_.report_event(kind, body.dump());
  } else if (log_) {
    log_->Append(ctx_.rank, kind, body);
  }
}

void TrainReporter::Status(const std::function<void(core::RankStatus&)>& update) {
  if (ctx_.update_status) ctx_.update_status(update);
}

void TrainReporter::Error(const std::string& kind, const std::string& message,
                          const nlohmann::json& details) {
  Flush();
  nlohmann::json body = details;
  body["message"] = message;
  if (!ctx_.rank_dir.empty()) {
    rundir::ErrorReport report{ctx_.rank, kind, message, base::UnixMillis(), details};
    try {
      rundir::WriteError(rundir::RankDir(ctx_.rank_dir).error(), report);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d: could not write error.json: %s\n", ctx_.rank, e.what());
    }
  }
  Event(kind, body);
}

}  // namespace dlaunch::worker
