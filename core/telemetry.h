// Small, dependency-free pieces of per-rank telemetry: memory readings and the events.jsonl log.
#pragma once

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace dlaunch::core {

// Resident set size of this process and its peak, from /proc/self/status; -1 when unreadable.
int64_t CurrentRssBytes();
int64_t PeakRssBytes();

int64_t UnixMillis();

// Appends one JSON object per line to a file, each line written with one write(2) so a crash
// never leaves a half line from this process, and readers see every event at once.
class EventLog {
 public:
  // Does not block. An empty path makes a log that drops everything (a world of one, say).
  explicit EventLog(const std::string& path);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Blocks for one write(2).
  void Append(const nlohmann::json& object);

 private:
  std::mutex mu_;
  int fd_ = -1;
};

// Writes `content` to `path` through a temporary file and rename(2): readers see the old or the
// new file, never half of one. Throws Error(kInternal) naming the path on failure.
void WriteFileAtomically(const std::string& path, const std::string& content);

}  // namespace dlaunch::core
