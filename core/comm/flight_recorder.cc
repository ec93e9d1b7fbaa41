#include "core/comm/flight_recorder.h"

#include "core/error.h"

namespace dlaunch::core {

FlightRecorder::FlightRecorder(int rank, int world_size, std::string backend, size_t capacity)
    : rank_(rank),
      world_size_(world_size),
      backend_(std::move(backend)),
      capacity_(capacity == 0 ? 1 : capacity),
      ring_(capacity_) {}

int64_t FlightRecorder::Record(const std::string& op, DataType dtype, size_t count, size_t bytes,
                               int peer, int root) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t seq = next_seq_++;
  FlightEntry& e = ring_[seq % capacity_];
  e = FlightEntry{};
  e.seq = seq;
  if (peer < 0) e.collective_seq = next_collective_++;
  e.op = op;
  e.dtype = dtype;
  e.count = count;
  e.bytes = bytes;
  e.peer = peer;
  e.root = root;
  e.scheduled_unix_ns = UnixNanos();
  return seq;
}

FlightEntry* FlightRecorder::Find(int64_t seq) {
  return const_cast<FlightEntry*>(static_cast<const FlightRecorder*>(this)->Find(seq));
}

const FlightEntry* FlightRecorder::Find(int64_t seq) const {
  if (seq < 0 || seq >= next_seq_ || seq < next_seq_ - static_cast<int64_t>(capacity_)) {
    return nullptr;
  }
  return &ring_[seq % capacity_];
}

std::optional<FlightEntry> FlightRecorder::Get(int64_t seq) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (const FlightEntry* e = Find(seq)) return *e;
  return std::nullopt;
}

int64_t FlightRecorder::last_started_collective_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_started_collective_;
}

void FlightRecorder::Start(int64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  if (seq > last_started_) last_started_ = seq;
  if (FlightEntry* e = Find(seq)) {
    if (e->collective_seq > last_started_collective_) last_started_collective_ = e->collective_seq;
    e->state = OpState::kStarted;
    e->started_unix_ns = UnixNanos();
  }
}

void FlightRecorder::Complete(int64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  if (seq > last_completed_) last_completed_ = seq;
  if (FlightEntry* e = Find(seq)) {
    e->state = OpState::kCompleted;
    e->completed_unix_ns = UnixNanos();
  }
}

void FlightRecorder::Fail(int64_t seq, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (FlightEntry* e = Find(seq)) {
    if (e->state == OpState::kFailed) return;  // keep the first reason
    e->state = OpState::kFailed;
    e->completed_unix_ns = UnixNanos();
    e->error = error;
  }
}

std::vector<FlightEntry> FlightRecorder::Entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<FlightEntry> out;
  int64_t first = std::max<int64_t>(0, next_seq_ - static_cast<int64_t>(capacity_));
  out.reserve(next_seq_ - first);
  for (int64_t s = first; s < next_seq_; ++s) out.push_back(ring_[s % capacity_]);
  return out;
}

std::optional<FlightEntry> FlightRecorder::OldestInFlight() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t first = std::max<int64_t>(0, next_seq_ - static_cast<int64_t>(capacity_));
  for (int64_t s = first; s < next_seq_; ++s) {
    const FlightEntry& e = ring_[s % capacity_];
    if (e.state == OpState::kStarted) return e;
  }
  return std::nullopt;
}

int64_t FlightRecorder::last_started_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_started_;
}

int64_t FlightRecorder::last_completed_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_completed_;
}

std::string FlightRecorder::current_op() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t first = std::max<int64_t>(0, next_seq_ - static_cast<int64_t>(capacity_));
  for (int64_t s = next_seq_ - 1; s >= first; --s) {
    const FlightEntry& e = ring_[s % capacity_];
    if (e.state == OpState::kStarted) return e.op;
  }
  return "";
}

rundir::FlightDump FlightRecorder::Dump(const std::string& reason) const {
  rundir::FlightDump dump;
  dump.rank = rank_;
  dump.world_size = world_size_;
  dump.backend = backend_;
  dump.reason = reason;
  dump.capacity = static_cast<int64_t>(capacity_);
  for (const FlightEntry& e : Entries()) {
    rundir::FlightEntry& out = dump.entries.emplace_back();
    out.seq = e.seq;
    out.collective_seq = e.collective_seq;
    out.op = e.op;
    out.dtype = DataTypeName(e.dtype);
    out.count = static_cast<int64_t>(e.count);
    out.bytes = static_cast<int64_t>(e.bytes);
    out.peer = e.peer;
    out.root = e.root;
    out.state = e.state;
    out.scheduled_unix_ns = e.scheduled_unix_ns;
    out.started_unix_ns = e.started_unix_ns;
    out.completed_unix_ns = e.completed_unix_ns;
    if (e.started_unix_ns > 0 && e.completed_unix_ns > 0) {
      out.duration_us = (e.completed_unix_ns - e.started_unix_ns) / 1000;
    }
    out.error = e.error;
  }
  dump.dumped_unix_ms = UnixNanos() / 1000000;
  return dump;
}

std::string FlightRecorder::ToJson(const std::string& reason) const {
  return rundir::FlightToJson(Dump(reason));
}

void FlightRecorder::DumpJson(const std::string& path, const std::string& reason) const {
  try {
    rundir::WriteFlight(path, Dump(reason));
  } catch (const Error& e) {
    throw Error(ErrorKind::kInternal, "rank " + std::to_string(rank_) +
                                          ": cannot write the flight recorder: " + e.what());
  }
}

}  // namespace dlaunch::core
