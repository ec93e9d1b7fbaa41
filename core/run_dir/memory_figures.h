// The memory figures a rank reports, under the same keys in every run-directory file that carries
// them: events.jsonl's "telemetry" lines and the trainer's "memory" lines (per step phase),
// heartbeat.json, and diagnosis.json's ranks. docs/run-directory.md, "Memory figures".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

namespace dlaunch::rundir {

// -1 = unknown or not applicable (the device figures off CUDA).
struct MemoryFigures {
  int64_t rss_bytes = -1;       // resident memory of the process
  int64_t peak_rss_bytes = -1;  // its high-water mark
  // CUDA's caching allocator: bytes in tensors, bytes it holds, and the allocated high-water mark.
  int64_t device_allocated_bytes = -1;
  int64_t device_reserved_bytes = -1;
  int64_t device_peak_bytes = -1;
  // cudaMemGetInfo: what the device has left and in all.
  int64_t device_free_bytes = -1;
  int64_t device_total_bytes = -1;

  bool operator==(const MemoryFigures& other) const;
  bool operator!=(const MemoryFigures& other) const { return !(*this == other); }
};

// Sets all seven keys in `obj` (made an object if null), -1 included, so that every file carries
// the same set.
void PutMemoryFigures(const MemoryFigures& figures, nlohmann::json* obj);
nlohmann::json MemoryFiguresJson(const MemoryFigures& figures);
// Lenient: an absent key (writers that omit the device figures off CUDA) or one of the wrong type
// is -1.
MemoryFigures GetMemoryFigures(const nlohmann::json& obj);

}  // namespace dlaunch::rundir
