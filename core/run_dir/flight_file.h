// rank<R>/flight.json: a rank's flight recorder, the last collectives it scheduled and how far
// each got. Written by the C++ FlightRecorder (core/comm) and by Python ranks; read by diagnosis.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/run_dir/schema.h"

namespace dlaunch::rundir {

inline constexpr char kFlightSchema[] = "flight";
inline constexpr size_t kMaxFlightBytes = 64 << 20;
inline constexpr size_t kMaxFlightEntries = 100000;

// How far one call got. "failed" also covers a call aborted by the watchdog.
enum class OpState { kScheduled, kStarted, kCompleted, kFailed };
const char* OpStateName(OpState state);  // scheduled | started | completed | failed
// kScheduled for anything it does not know: such an entry claims no progress.
OpState ParseOpState(std::string_view name);

// Point-to-point ops: their seq counts on one rank only, so collectives are compared across ranks
// by collective_seq when any rank recorded one of these.
bool IsPointToPoint(std::string_view op);  // send, recv

struct FlightEntry {
  int64_t seq = -1;  // 0, 1, 2, ... per recorder, every call
  // Index among collectives only (-1 for send/recv, or a recorder that does not write it): ranks
  // agree on it even when their point-to-point traffic differs.
  int64_t collective_seq = -1;
  // allreduce | broadcast | allgather | reduce_scatter | alltoall | barrier | send | recv
  std::string op;
  std::string dtype;  // float | double | half | bfloat16 | int32 | int64 | uint8
  int64_t count = -1;
  int64_t bytes = -1;
  int peer = -1;  // send/recv: the other rank
  int root = -1;  // broadcast (and rooted ops): the root rank
  OpState state = OpState::kScheduled;
  int64_t scheduled_unix_ns = 0;
  int64_t started_unix_ns = 0;
  int64_t completed_unix_ns = 0;  // also when it failed
  int64_t duration_us = 0;        // completed - started; 0 when not completed
  std::string error;              // why it failed; "" otherwise

  // Written by Python ranks (the rank agent); empty or -1 from native recorders.
  std::string pg;              // process group: "0" is the default group
  int64_t pg_seq = -1;         // index among this process group's calls
  std::vector<int64_t> shape;  // of the tensor (a list of tensors: its length first)
  std::string call_site;       // "train.py:42 main"; "DDP bucket 0 of train.py:30 <module>"
  int bucket = -1;             // DDP gradient bucket of a bucket all-reduce
};

// A process group a Python rank created (FlightDump::process_groups).
struct ProcessGroupInfo {
  std::vector<int> ranks;  // global ranks, in group-rank order
  std::string backend;
  std::string desc;  // torch's description of it ("mesh_tp", "default_pg"); "" when it has none
};

struct FlightDump {
  int rank = -1;
  int world_size = 0;
  std::string backend;  // gloo | nccl | ...
  // Why it was written: exit | timeout | request (the launcher asked) | error | signal
  std::string reason;
  int64_t dumped_unix_ms = 0;
  int64_t capacity = 0;              // ring size: older calls fell out
  std::vector<FlightEntry> entries;  // sorted by seq when read
  // Python ranks: process group name -> its members; empty from native recorders.
  std::map<std::string, ProcessGroupInfo> process_groups;
  // Entries the reader left out, the oldest, beyond the bound it was asked to keep; not written.
  int64_t dropped_entries = 0;

  const FlightEntry* Find(int64_t seq) const;  // null when not in the dump
  // Highest seq completed with every lower seq in the buffer completed too; -1 when none.
  int64_t LastCompletedSeq() const;
  int64_t LastStartedSeq() const;  // highest seq that got past "scheduled"; -1 when none
};

// One line of JSON, without the trailing newline.
std::string FlightToJson(const FlightDump& dump);
// Atomically (unique temp file + rename). Blocks for the write; throws Error(kInternal).
void WriteFlight(const std::string& path, const FlightDump& dump);

// One entry of "entries" (also a line of a Python rank's flight_tail.jsonl); false for a non-object
// or an entry without a seq. Never throws.
bool FlightEntryFromJson(const nlohmann::json& entry, FlightEntry* out);

// Never throws. Problems ("rank2/flight.json is not valid JSON ...") go to `problems`, named by
// `label`. kInvalid leaves `out` with what could be read. Keeps the newest `max_entries` entries
// by seq (at most kMaxFlightEntries) and counts the others in out->dropped_entries. Blocks for
// the read and the parse (~1 ms for 2,000 entries).
FileState ReadFlight(const std::string& path, const std::string& label, FlightDump* out,
                     std::vector<std::string>* problems, size_t max_entries = kMaxFlightEntries);

}  // namespace dlaunch::rundir
