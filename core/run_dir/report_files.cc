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

namespace {
std::string OpTableSchemaLine() { return "# schema: " + SchemaId(kOpTableSchema) + "\n"; }
}  // namespace

void WriteOpTable(const std::string& path, const std::string& table) {
  base::WriteFileAtomically(path, OpTableSchemaLine() + table);
}

FileState ReadOpTable(const std::string& path, const std::string& label, std::string* table,
                      std::vector<std::string>* problems) {
  std::string text;
  switch (base::ReadFileBounded(path, kMaxOpTableBytes, &text)) {
    case base::ReadStatus::kOk:
      break;
    case base::ReadStatus::kMissing:
      return FileState::kAbsent;
    case base::ReadStatus::kTooLarge:
      problems->push_back(label + ": larger than " + std::to_string(kMaxOpTableBytes >> 20) +
                          " MiB, not read");
      return FileState::kInvalid;
    default:
      problems->push_back(label + ": not a readable file");
      return FileState::kInvalid;
  }
  // "# schema: dlaunch.op_table/<N>": a later N is read as this version, and said.
  const std::string prefix =
      "# schema: " + SchemaId(kOpTableSchema).substr(0, SchemaId(kOpTableSchema).rfind('/') + 1);
  const size_t eol = text.find('\n');
  const std::string first = text.substr(0, eol);
  if (first.compare(0, prefix.size(), prefix) != 0 || eol == std::string::npos) {
    problems->push_back(label + ": not a dlaunch op table (its first line is not \"" + prefix +
                        "N\")");
    return FileState::kInvalid;
  }
  if (first + "\n" != OpTableSchemaLine()) {
    problems->push_back(label + ": " + first.substr(10) + " is newer than this dlaunch reads (" +
                        SchemaId(kOpTableSchema) + "); read as that");
  }
  *table = text.substr(eol + 1);
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
