#include "core/run_dir/error_file.h"

#include <algorithm>

#include "core/base/files.h"
#include "core/run_dir/json_fields.h"
#include "core/run_dir/schema.h"

namespace dlaunch::rundir {

bool IsOutOfMemory(const ErrorReport& report) { return report.kind == "oom"; }

void WriteError(const std::string& path, const ErrorReport& report) {
  nlohmann::json doc = report.fields.is_object() ? report.fields : nlohmann::json::object();
  doc["schema"] = SchemaId(kErrorSchema);
  doc["rank"] = report.rank;
  doc["kind"] = report.kind;
  doc["message"] = report.message;
  doc["unix_ms"] = report.unix_ms;
  base::WriteFileAtomically(path, detail::Dump(doc, 2) + "\n");
}

FileState ReadError(const std::string& path, const std::string& label, ErrorReport* out,
                    std::vector<std::string>* problems) {
  nlohmann::json j;
  if (FileState state =
          detail::ReadJsonObject(path, label, kErrorSchema, kMaxErrorBytes, &j, problems);
      state != FileState::kOk) {
    return state;
  }
  out->rank = detail::GetInt32(j, "rank", -1, -1);
  out->kind = detail::GetString(j, "kind");
  out->message = detail::GetString(j, "message");
  out->unix_ms = detail::GetInt(j, "unix_ms", 0);
  out->fields = std::move(j);
  return FileState::kOk;
}

}  // namespace dlaunch::rundir
