// One thread per communicator that guarantees no collective waits forever: it times the oldest
// running op against the collective timeout and, on expiry, finds the ranks that never joined,
// aborts the communicator, dumps the flight recorder and reports. It also publishes this rank's
// progress (last started seq) to the store, which is how peers tell who is missing.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "core/comm/comm_options.h"
#include "core/comm/flight_recorder.h"

namespace dlaunch::core {

class Watchdog {
 public:
  // abort: makes every pending op of the communicator fail (must not block for long).
  // poll: optional backend hook run every tick (the NCCL backend checks its events there).
  Watchdog(FlightRecorder& recorder, const CommOptions& options, std::function<void()> abort,
           std::function<void()> poll = nullptr);
  ~Watchdog();

  // Starts the thread. Does not block.
  void Start();
  // Stops the thread; blocks for at most one tick plus a Fire() that is under way.
  void Stop();

  // Declares op `seq` failed: the first call looks up missing ranks (at most ~1 s of store reads),
  // aborts, dumps, calls on_timeout and maybe exits; later calls return the first report, once the
  // first call is done.
  // peer_error: empty for a timeout, else the broken-connection error that ended the op.
  TimeoutReport Fire(int64_t seq, const std::string& op, const std::string& peer_error = "");
  bool fired() const { return fired_.load(); }
  // When the communicator goes (a clean exit too): the flight recorder to flight_dump_path with
  // reason "exit", unless the watchdog fired (its "timeout"/"error" dump says more). Blocks for
  // the write; never throws.
  void DumpAtExit();

  // Store key under which rank r publishes its last started collective_seq.
  static std::string ProgressKey(int rank);

 private:
  void Loop();
  void PublishProgress(bool force);
  // Peers whose published collective progress is below `collective_seq`.
  std::vector<int> FindMissingRanks(int64_t collective_seq);

  FlightRecorder& recorder_;
  const CommOptions options_;
  const std::function<void()> abort_;
  const std::function<void()> poll_;
  const std::chrono::milliseconds tick_;
  const std::chrono::milliseconds publish_period_;

  std::mutex fire_mu_;
  std::optional<TimeoutReport> report_;
  std::atomic<bool> fired_{false};

  std::mutex publish_mu_;
  int64_t published_seq_ = -2;
  std::chrono::steady_clock::time_point last_publish_;

  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dlaunch::core
