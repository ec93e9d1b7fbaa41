// rank<R>/events.jsonl: what a rank reported, one JSON object per line, appended while it runs
// (telemetry every few steps, timeouts, errors, OOMs, dumps, checkpoints). Written by the rank
// (libdlaunch's Runtime, the built-in trainer, Python ranks); read by diagnosis and benchmarks.
#pragma once

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/run_dir/flight_file.h"
#include "core/run_dir/memory_figures.h"

namespace dlaunch::rundir {

inline constexpr char kEventsSchema[] = "events";
// Only the newest part of a long run's log is read.
inline constexpr size_t kMaxEventsBytes = 32 << 20;

// The kinds diagnosis acts on; any other kind ("resumed", "checkpoint", ...) is kept as kOther.
enum class EventKind { kTelemetry, kTimeout, kError, kOom, kDumped, kOther };
EventKind ParseEventKind(std::string_view kind);

struct Event {
  int64_t unix_ms = 0;
  int rank = -1;
  std::string kind;     // telemetry | timeout | error | oom | dumped | any other word
  nlohmann::json body;  // the whole line, the fields above included
  EventKind type() const { return ParseEventKind(kind); }
};

// A "telemetry" line: what a rank reads off itself every heartbeat window (averaged over it).
// Unknown figures are -1. The memory figures come first in the struct, flat, as in the line.
struct TelemetrySample : MemoryFigures {
  int64_t unix_ms = 0;  // of the line; not part of the body
  int64_t step = -1;
  int64_t total_steps = -1;
  double loss = -1;
  double train_accuracy = -1;  // 0..1 over the window's training batches; -1 = not measured
  std::string phase;           // init | data | forward | backward | communication | optimizer | ...
  double samples_per_sec = -1;
  double step_ms = -1;
  double compute_ms = -1;           // per step
  double comm_wait_ms = -1;         // per step, blocked waiting for collectives
  int64_t bytes_communicated = -1;  // in the window
};

// The line's body (no "schema", "unix_ms", "rank", "kind"); `train_accuracy` only when measured.
nlohmann::json TelemetryToJson(const TelemetrySample& sample);
// Lenient: absent or mistyped fields are -1 ("" for the phase); unix_ms comes from the line too.
TelemetrySample TelemetryFromJson(const nlohmann::json& line);

struct EventsFile {
  std::vector<TelemetrySample> telemetry;  // the "telemetry" lines, in file order
  std::vector<Event> events;               // every other line, in file order
};

// One line (no newline): {"schema", "unix_ms", "rank", "kind"} and the body's fields.
std::string EventToLine(int64_t unix_ms, int rank, const std::string& kind,
                        const nlohmann::json& body);

// Appends lines to events.jsonl, each with one write(2) on an O_APPEND descriptor, so a crash
// never leaves a half line from this process and several writers never interleave within a line.
class EventLog {
 public:
  // Does not block. An empty path makes a log that drops everything (a world of one, say).
  explicit EventLog(const std::string& path);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Blocks for one write(2). `body` must be an object (or null); unix_ms is now.
  void Append(int rank, const std::string& kind, const nlohmann::json& body);
  void Append(int64_t unix_ms, int rank, const std::string& kind, const nlohmann::json& body);

 private:
  std::mutex mu_;
  int fd_ = -1;
};

// Never throws. Unreadable lines are skipped and counted in one problem line.
FileState ReadEvents(const std::string& path, const std::string& label, EventsFile* out,
                     std::vector<std::string>* problems);

}  // namespace dlaunch::rundir
