#include "core/comm/watchdog.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dlaunch::core {
namespace {

using std::chrono::milliseconds;

milliseconds Clamp(milliseconds v, milliseconds lo, milliseconds hi) {
  return std::max(lo, std::min(hi, v));
}

}  // namespace

std::string TimeoutReport::ToJson() const {
  nlohmann::json j = {{"seq", seq},
                      {"op", op},
                      {"timeout_ms", timeout_ms},
                      {"missing_ranks", missing_ranks},
                      {"cause", TimeoutCauseName(cause)},
                      {"message", message}};
  return j.dump();
}

Watchdog::Watchdog(FlightRecorder& recorder, const CommOptions& options,
                   std::function<void()> abort, std::function<void()> poll)
    : recorder_(recorder),
      options_(options),
      abort_(std::move(abort)),
      poll_(std::move(poll)),
      // Fine enough to report within the timeout plus a fraction of a second, coarse enough to
      // cost nothing.
      tick_(Clamp(options.timeout / 20, milliseconds(2), milliseconds(50))),
      // Peers read our progress only after their own timeout, so publishing a few times per
      // timeout is enough and keeps store traffic off the collective path.
      publish_period_(Clamp(options.timeout / 5, milliseconds(5), milliseconds(1000))) {}

Watchdog::~Watchdog() { Stop(); }

std::string Watchdog::ProgressKey(int rank) { return "progress/" + std::to_string(rank); }

void Watchdog::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void Watchdog::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void Watchdog::DumpAtExit() {
  if (options_.flight_dump_path.empty() || fired_) return;
  try {
    recorder_.DumpJson(options_.flight_dump_path, "exit");
  } catch (const std::exception& e) {
    std::cerr << "dlaunch: " << e.what() << std::endl;
  }
}

void Watchdog::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    try {
      if (poll_) poll_();
      PublishProgress(false);
      if (!fired_) {
        if (auto entry = recorder_.OldestInFlight()) {
          int64_t age_ms = (UnixNanos() - entry->started_unix_ns) / 1000000;
          if (age_ms >= options_.timeout.count()) Fire(entry->seq, entry->op);
        }
      }
    } catch (const std::exception& e) {
      // A store hiccup must not kill the watchdog; the timeout check runs again next tick.
      std::cerr << "dlaunch watchdog (rank " << options_.rank << "): " << e.what() << std::endl;
    }
    lock.lock();
    stop_cv_.wait_for(lock, tick_, [&] { return stop_; });
  }
}

void Watchdog::PublishProgress(bool force) {
  if (!options_.store || options_.size <= 1) return;
  std::lock_guard<std::mutex> lock(publish_mu_);
  int64_t seq = recorder_.last_started_collective_seq();
  auto now = std::chrono::steady_clock::now();
  if (!force && (seq == published_seq_ || now - last_publish_ < publish_period_)) return;
  options_.store->Set(ProgressKey(options_.rank), std::to_string(seq));
  published_seq_ = seq;
  last_publish_ = now;
}

std::vector<int> Watchdog::FindMissingRanks(int64_t collective_seq) {
  std::vector<int> missing;
  if (!options_.store) return missing;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (int r = 0; r < options_.size; ++r) {
    if (r == options_.rank) continue;
    if (std::chrono::steady_clock::now() > deadline) break;  // report what we know in time
    int64_t peer_seq = -1;
    try {
      std::string key = ProgressKey(r);
      if (options_.store->Check(key))
        peer_seq = std::stoll(options_.store->Get(key, milliseconds(200)));
    } catch (const std::exception&) {
      continue;  // unknown is not the same as missing
    }
    if (peer_seq < collective_seq) missing.push_back(r);
  }
  return missing;
}

TimeoutReport Watchdog::Fire(int64_t seq, const std::string& op, const std::string& peer_error) {
  std::lock_guard<std::mutex> lock(fire_mu_);
  if (report_) return *report_;

  TimeoutReport report;
  report.rank = options_.rank;
  report.seq = seq;
  report.op = op;
  report.timeout_ms = options_.timeout.count();
  report.cause = peer_error.empty() ? TimeoutCause::kTimeout : TimeoutCause::kPeerGone;
  try {
    PublishProgress(true);
  } catch (const std::exception&) {
  }
  auto entry = recorder_.Get(seq);
  if (entry && entry->collective_seq < 0 && entry->peer >= 0) {
    // Point-to-point: the only rank that can be missing is the peer.
    report.missing_ranks = {entry->peer};
  } else if (entry) {
    report.missing_ranks = FindMissingRanks(entry->collective_seq);
  }
  if (peer_error.empty()) {
    report.message = op + " seq " + std::to_string(seq) + " timed out after " +
                     std::to_string(report.timeout_ms) + " ms on rank " +
                     std::to_string(options_.rank);
  } else {
    report.message = op + " seq " + std::to_string(seq) + " failed on rank " +
                     std::to_string(options_.rank) + ": " + peer_error;
  }
  for (int r : report.missing_ranks) {
    report.message += "; rank " + std::to_string(r) + " missing from seq " + std::to_string(seq);
  }
  report_ = report;
  fired_ = true;

  if (abort_) abort_();
  if (!options_.flight_dump_path.empty()) {
    try {
      recorder_.DumpJson(options_.flight_dump_path, report.is_hang() ? "timeout" : "error");
    } catch (const std::exception& e) {
      std::cerr << "dlaunch watchdog: " << e.what() << std::endl;
    }
  }
  std::cerr << "dlaunch watchdog: " << report.message << std::endl;
  if (options_.on_timeout) {
    try {
      options_.on_timeout(report);
    } catch (const std::exception& e) {
      std::cerr << "dlaunch watchdog: timeout callback failed: " << e.what() << std::endl;
    }
  }
  if (options_.exit_on_timeout && report.is_hang()) {
    std::fflush(nullptr);
    std::_Exit(kWatchdogExitCode);
  }
  return report;
}

}  // namespace dlaunch::core
