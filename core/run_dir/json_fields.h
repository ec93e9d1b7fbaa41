// Lenient field readers for run-directory files (internal to core/run_dir): absent keys and wrong
// types give the fallback, so a half-broken file still yields what it can.
#pragma once

#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/run_dir/schema.h"

namespace dlaunch::rundir::detail {

int64_t GetInt(const nlohmann::json& j, const char* key, int64_t fallback);
// GetInt clamped into [lo, hi].
int GetInt32(const nlohmann::json& j, const char* key, int fallback, int lo = INT32_MIN,
             int hi = INT32_MAX);
double GetDouble(const nlohmann::json& j, const char* key, double fallback);
std::string GetString(const nlohmann::json& j, const char* key);
bool GetBool(const nlohmann::json& j, const char* key, bool fallback);
std::vector<std::string> GetStrings(const nlohmann::json& j, const char* key);
// Integers of an array within [lo, hi); other elements are skipped.
std::vector<int> GetInts(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi);

// Reads `path` (at most `max_bytes`, regular files only) and parses one JSON object whose schema
// is `file`'s. A missing file is kAbsent with no problem; anything else that fails adds a problem
// "<label> ..." and is kInvalid. A newer version adds a problem and is kOk.
FileState ReadJsonObject(const std::string& path, const std::string& label, const std::string& file,
                         size_t max_bytes, nlohmann::json* out, std::vector<std::string>* problems);
// ReadJsonObject's checks on text already read (a message that came through a pipe).
FileState ParseJsonObject(const std::string& text, const std::string& label,
                          const std::string& file, nlohmann::json* out,
                          std::vector<std::string>* problems);

// Enum <-> name through a table indexed by the enum's value; `fallback` for unknown names.
template <typename Enum, size_t N>
Enum ParseName(std::string_view name, const char* const (&names)[N], Enum fallback) {
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) return static_cast<Enum>(i);
  }
  return fallback;
}
template <typename Enum, size_t N>
const char* NameOf(Enum value, const char* const (&names)[N]) {
  const size_t i = static_cast<size_t>(value);
  return i < N ? names[i] : names[0];
}

// dump() that never throws on bad UTF-8 in strings a rank wrote.
std::string Dump(const nlohmann::json& j, int indent = -1);

}  // namespace dlaunch::rundir::detail
