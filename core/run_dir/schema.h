// The "schema" field every JSON file of a run directory carries: "dlaunch.<file>/<version>".
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace dlaunch::rundir {

// What a reader found: no file, a file it could not use (a problem line says why), or a file.
enum class FileState { kAbsent, kInvalid, kOk };

// Version 1 of every file; a reader takes any version it knows.
inline constexpr int kSchemaVersion = 1;

// "dlaunch.flight/1" for "flight".
std::string SchemaId(const std::string& file);

enum class SchemaMatch {
  kSame,   // this file, a version this reader knows, or no "schema" at all (a version-1 file
           // from before the field existed)
  kNewer,  // this file, a later version: read what is known, say so
  kOther,  // another file's schema, or not a schema string: do not read it as this file
};
// Compares `doc`'s "schema" with `file`; `problem` gets a sentence for kNewer and kOther.
SchemaMatch CheckSchema(const nlohmann::json& doc, const std::string& file, std::string* problem);

}  // namespace dlaunch::rundir
