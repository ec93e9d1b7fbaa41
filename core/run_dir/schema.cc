#include "core/run_dir/schema.h"

namespace dlaunch::rundir {

std::string SchemaId(const std::string& file) {
  return "dlaunch." + file + "/" + std::to_string(kSchemaVersion);
}

SchemaMatch CheckSchema(const nlohmann::json& doc, const std::string& file, std::string* problem) {
  auto it = doc.find("schema");
  if (it == doc.end()) return SchemaMatch::kSame;
  const std::string prefix = "dlaunch." + file + "/";
  if (!it->is_string() || it->get_ref<const std::string&>().rfind(prefix, 0) != 0) {
    *problem = "has schema " + it->dump() + ", not " + SchemaId(file);
    return SchemaMatch::kOther;
  }
  const std::string version = it->get<std::string>().substr(prefix.size());
  int v = 0;
  for (char c : version) {
    if (c < '0' || c > '9' || v > 100000) {
      *problem = "has schema " + it->dump() + ", not " + SchemaId(file);
      return SchemaMatch::kOther;
    }
    v = v * 10 + (c - '0');
  }
  if (version.empty()) {
    *problem = "has schema " + it->dump() + ", not " + SchemaId(file);
    return SchemaMatch::kOther;
  }
  if (v > kSchemaVersion) {
    *problem = "is " + it->get<std::string>() + ", newer than this dlaunch reads (" +
               SchemaId(file) + "): read as version " + std::to_string(kSchemaVersion);
    return SchemaMatch::kNewer;
  }
  return SchemaMatch::kSame;
}

}  // namespace dlaunch::rundir
