#include "core/run_dir/json_fields.h"

#include <algorithm>

#include "core/base/files.h"
#include "core/run_dir/schema.h"

namespace dlaunch::rundir::detail {

using nlohmann::json;

int64_t GetInt(const json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    return v > static_cast<uint64_t>(INT64_MAX) ? fallback : static_cast<int64_t>(v);
  }
  if (it->is_number_float()) {
    const double v = it->get<double>();
    // Out of range (or NaN) doubles do not convert to int64_t defined-ly.
    if (!(v > -9.2e18 && v < 9.2e18)) return fallback;
    return static_cast<int64_t>(v);
  }
  return fallback;
}

int GetInt32(const json& j, const char* key, int fallback, int lo, int hi) {
  return static_cast<int>(std::clamp<int64_t>(GetInt(j, key, fallback), lo, hi));
}

double GetDouble(const json& j, const char* key, double fallback) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return fallback;
  return it->get<double>();
}

std::string GetString(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

bool GetBool(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return fallback;
  return it->get<bool>();
}

std::vector<std::string> GetStrings(const json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const json& v : *it) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

std::vector<int> GetInts(const json& j, const char* key, int64_t lo, int64_t hi) {
  std::vector<int> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const json& v : *it) {
    if (!v.is_number_integer()) continue;
    const int64_t x = v.get<int64_t>();
    if (x >= lo && x < hi) out.push_back(static_cast<int>(x));
  }
  return out;
}

FileState ReadJsonObject(const std::string& path, const std::string& label, const std::string& file,
                         size_t max_bytes, json* out, std::vector<std::string>* problems) {
  std::string text;
  const base::ReadStatus status = base::ReadFileBounded(path, max_bytes, &text);
  if (status == base::ReadStatus::kMissing) return FileState::kAbsent;
  if (status != base::ReadStatus::kOk) {
    problems->push_back(label + " " + base::DescribeReadStatus(status, max_bytes));
    return FileState::kInvalid;
  }
  return ParseJsonObject(text, label, file, out, problems);
}

FileState ParseJsonObject(const std::string& text, const std::string& label,
                          const std::string& file, json* out, std::vector<std::string>* problems) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    problems->push_back(label + " is not valid JSON (" + std::to_string(text.size()) +
                        " bytes; truncated?)");
    return FileState::kInvalid;
  }
  std::string problem;
  switch (CheckSchema(j, file, &problem)) {
    case SchemaMatch::kOther:
      problems->push_back(label + " " + problem);
      return FileState::kInvalid;
    case SchemaMatch::kNewer:
      problems->push_back(label + " " + problem);
      break;
    case SchemaMatch::kSame:
      break;
  }
  *out = std::move(j);
  return FileState::kOk;
}

std::string Dump(const json& j, int indent) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace dlaunch::rundir::detail
