// Per-communicator ring buffer of the last N collectives: what diagnosis reads after a hang.
// Every call of a Communicator passes through it (scheduled -> started -> completed | failed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/base/clock.h"
#include "core/comm/communicator.h"
#include "core/run_dir/flight_file.h"

namespace dlaunch::core {

using rundir::OpState;
using rundir::OpStateName;

struct FlightEntry {
  int64_t seq = -1;
  // Index among collectives only (p2p ops get -1). Ranks agree on it even when their p2p traffic
  // differs, so it is what peers compare to tell who never joined.
  int64_t collective_seq = -1;
  std::string op;  // allreduce, broadcast, allgather, reduce_scatter, alltoall, send, recv, barrier
  DataType dtype = DataType::kUint8;
  size_t count = 0;
  size_t bytes = 0;
  int peer = -1;
  int root = -1;
  OpState state = OpState::kScheduled;
  int64_t scheduled_unix_ns = 0;
  int64_t started_unix_ns = 0;
  int64_t completed_unix_ns = 0;
  std::string error;
};

class FlightRecorder {
 public:
  static constexpr size_t kDefaultCapacity = 2000;

  FlightRecorder(int rank, int world_size, std::string backend, size_t capacity = kDefaultCapacity);

  // All methods are thread-safe and do not block beyond a short internal lock.
  // Appends an entry in state "scheduled" and returns its seq (0, 1, 2, ... per recorder).
  // An entry with a peer is point-to-point; every other entry is a collective.
  int64_t Record(const std::string& op, DataType dtype, size_t count, size_t bytes, int peer = -1,
                 int root = -1);
  void Start(int64_t seq);
  void Complete(int64_t seq);
  void Fail(int64_t seq, const std::string& error);

  // Oldest entries first; at most capacity() of them.
  std::vector<FlightEntry> Entries() const;
  // The entry of `seq` if still in the ring.
  std::optional<FlightEntry> Get(int64_t seq) const;
  // The oldest entry started but neither completed nor failed, if any: what a watchdog times.
  std::optional<FlightEntry> OldestInFlight() const;
  // -1 before the first one; for heartbeats (RankStatus::last_started_seq/last_completed_seq).
  int64_t last_started_seq() const;
  int64_t last_completed_seq() const;
  // collective_seq of the newest started collective; -1 before the first.
  int64_t last_started_collective_seq() const;
  // Op of the newest started, unfinished entry; "" when idle.
  std::string current_op() const;

  size_t capacity() const { return capacity_; }
  int rank() const { return rank_; }

  // The flight.json document (core/run_dir). reason: exit | timeout | request | error | signal.
  rundir::FlightDump Dump(const std::string& reason) const;
  std::string ToJson(const std::string& reason) const;
  // Writes the dump atomically (unique temp file + rename), creating no directories. Blocks for
  // the write; throws Error(kInternal) naming the path when it fails.
  void DumpJson(const std::string& path, const std::string& reason) const;

 private:
  FlightEntry* Find(int64_t seq);  // requires mu_; null when overwritten
  const FlightEntry* Find(int64_t seq) const;

  const int rank_;
  const int world_size_;
  const std::string backend_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::vector<FlightEntry> ring_;  // entry seq lives at ring_[seq % capacity_]
  int64_t next_seq_ = 0;
  int64_t next_collective_ = 0;
  int64_t last_started_collective_ = -1;
  int64_t last_started_ = -1;
  int64_t last_completed_ = -1;
};

using base::UnixNanos;

}  // namespace dlaunch::core
