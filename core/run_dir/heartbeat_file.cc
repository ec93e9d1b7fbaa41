#include "core/run_dir/heartbeat_file.h"

#include <nlohmann/json.hpp>

#include "core/base/files.h"
#include "core/run_dir/json_fields.h"

namespace dlaunch::rundir {

using detail::GetInt;
using detail::GetString;
using nlohmann::json;

void WriteHeartbeat(const std::string& path, const Heartbeat& h) {
  json doc = {{"schema", SchemaId(kHeartbeatSchema)},
              {"rank", h.rank},
              {"pid", h.pid},
              {"unix_ms", h.unix_ms},
              {"step", h.step},
              {"phase", h.phase},
              {"phase_since_unix_ms", h.phase_since_unix_ms},
              {"progress_unix_ms", h.progress_unix_ms},
              {"last_started_seq", h.last_started_seq},
              {"last_completed_seq", h.last_completed_seq},
              {"current_op", h.current_op},
              {"section", nullptr}};
  PutMemoryFigures(h, &doc);
  doc["steps_timed"] = h.steps_timed;
  doc["step_busy_ms_total"] = h.step_busy_ms_total;
  if (h.arrivals_first_seq >= 0) {
    doc["arrivals"] = {{"first_seq", h.arrivals_first_seq}, {"started_unix_us", h.arrival_unix_us}};
  }
  if (!h.section.empty()) {
    doc["section"] = {
        {"name", h.section},
        {"since_unix_ms", h.section_since_unix_ms},
        {"timeout_s", h.section_timeout_s < 0 ? json(nullptr) : json(h.section_timeout_s)}};
  }
  base::WriteFileAtomically(path, detail::Dump(doc) + "\n");
}

namespace {

void FromJson(const json& j, Heartbeat* out) {
  Heartbeat& h = *out;
  static_cast<MemoryFigures&>(h) = GetMemoryFigures(j);
  h.rank = detail::GetInt32(j, "rank", -1, -1);
  h.pid = detail::GetInt32(j, "pid", 0, 0);
  h.unix_ms = GetInt(j, "unix_ms", 0);
  h.step = GetInt(j, "step", 0);
  h.phase = GetString(j, "phase");
  h.phase_since_unix_ms = GetInt(j, "phase_since_unix_ms", 0);
  h.progress_unix_ms = GetInt(j, "progress_unix_ms", 0);
  h.last_started_seq = GetInt(j, "last_started_seq", -1);
  h.last_completed_seq = GetInt(j, "last_completed_seq", -1);
  h.current_op = GetString(j, "current_op");
  h.steps_timed = GetInt(j, "steps_timed", 0);
  h.step_busy_ms_total = detail::GetDouble(j, "step_busy_ms_total", 0);
  if (auto arrivals = j.find("arrivals"); arrivals != j.end() && arrivals->is_object()) {
    h.arrivals_first_seq = GetInt(*arrivals, "first_seq", -1);
    auto starts = arrivals->find("started_unix_us");
    if (starts != arrivals->end() && starts->is_array()) {
      for (const json& us : *starts)
        h.arrival_unix_us.push_back(us.is_number() ? us.get<int64_t>() : 0);
    }
  }
  auto section = j.find("section");
  if (section != j.end() && section->is_object()) {
    h.section = GetString(*section, "name");
    h.section_since_unix_ms = GetInt(*section, "since_unix_ms", 0);
    h.section_timeout_s = detail::GetDouble(*section, "timeout_s", -1);
  }
  h.write_error = GetString(j, "write_error");
}

}  // namespace

FileState ReadHeartbeat(const std::string& path, const std::string& label, Heartbeat* out,
                        std::vector<std::string>* problems) {
  json j;
  const FileState state =
      detail::ReadJsonObject(path, label, kHeartbeatSchema, kMaxHeartbeatBytes, &j, problems);
  if (state == FileState::kOk) FromJson(j, out);
  return state;
}

FileState ParseHeartbeat(const std::string& text, const std::string& label, Heartbeat* out,
                         std::vector<std::string>* problems) {
  if (text.size() > kMaxHeartbeatBytes) {
    problems->push_back(label + " is larger than " + std::to_string(kMaxHeartbeatBytes) + " bytes");
    return FileState::kInvalid;
  }
  json j;
  const FileState state = detail::ParseJsonObject(text, label, kHeartbeatSchema, &j, problems);
  if (state == FileState::kOk) FromJson(j, out);
  return state;
}

void WriteDumpRequest(const std::string& path, const std::string& reason, int64_t unix_ms) {
  const json doc = {
      {"schema", SchemaId(kDumpRequestSchema)}, {"reason", reason}, {"unix_ms", unix_ms}};
  base::WriteFileAtomically(path, detail::Dump(doc) + "\n");
}

}  // namespace dlaunch::rundir
