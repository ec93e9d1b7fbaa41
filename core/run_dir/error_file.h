// rank<R>/error.json: why a rank failed, in its own words, written by the rank just before it
// exits (the built-in trainer, Python ranks). Read by diagnosis, which trusts it over exit codes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/run_dir/flight_file.h"

namespace dlaunch::rundir {

inline constexpr char kErrorSchema[] = "error";
inline constexpr size_t kMaxErrorBytes = 4 << 20;

struct ErrorReport {
  int rank = -1;
  // oom (out of memory: diagnosis names it the root cause before any other error) | error |
  // timeout (a collective watchdog fired; then seq, op, timeout_ms and missing_ranks say where)
  std::string kind;
  std::string message;
  int64_t unix_ms = 0;
  // Every field of the file, those above included: kind-specific details (memory figures of an
  // OOM, the timed-out collective).
  nlohmann::json fields = nlohmann::json::object();
};

// An out-of-memory report (kind "oom"): diagnosis names it the root cause before any other error,
// and the restart policy never reads it as deterministic. Pure.
bool IsOutOfMemory(const ErrorReport& report);

// Atomically; `report.fields` first, then rank, kind, message and unix_ms over them. Blocks for
// the write; throws Error(kInternal).
void WriteError(const std::string& path, const ErrorReport& report);
// Never throws.
FileState ReadError(const std::string& path, const std::string& label, ErrorReport* out,
                    std::vector<std::string>* problems);

}  // namespace dlaunch::rundir
