#include "core/run_dir/report_files.h"

#include "core/base/files.h"
#include "core/run_dir/json_fields.h"
#include "core/run_dir/schema.h"

namespace dlaunch::rundir {

using nlohmann::json;

void WritePreflight(const std::string& path, json doc) {
  doc["schema"] = SchemaId(kPreflightSchema);
  base::WriteFileAtomically(path, detail::Dump(doc, 2) + "\n");
}

FileState ReadPreflight(const std::string& path, const std::string& label, PreflightReport* out,
                        std::vector<std::string>* problems) {
  json j;
  if (FileState state =
          detail::ReadJsonObject(path, label, kPreflightSchema, kMaxPreflightBytes, &j, problems);
      state != FileState::kOk) {
    return state;
  }
  out->verdict = detail::GetString(j, "verdict");
  out->reasons = detail::GetStrings(j, "reasons");
  out->world_size = static_cast<int>(detail::GetInt(j, "world_size", 0));
  out->backend = detail::GetString(j, "backend");
  out->unix_ms = detail::GetInt(j, "unix_ms", 0);
  out->document = std::move(j);
  return FileState::kOk;
}

void WriteTrace(const std::string& path, json doc) {
  doc["schema"] = SchemaId(kTraceSchema);
  base::WriteFileAtomically(path, detail::Dump(doc) + "\n");
}

FileState ReadTrace(const std::string& path, const std::string& label, json* out,
                    std::vector<std::string>* problems) {
  return detail::ReadJsonObject(path, label, kTraceSchema, kMaxTraceBytes, out, problems);
}

}  // namespace dlaunch::rundir
