#include "core/run_dir/job_events.h"

#include <nlohmann/json.hpp>

#include "core/run_dir/json_fields.h"
#include "core/run_dir/schema.h"

namespace dlaunch::rundir {
namespace {

using nlohmann::json;

const char* const kKindNames[] = {"unknown",       "rank_start", "rank_exit",
                                  "restart",       "hang",       "straggler_start",
                                  "straggler_end", "node_lost",  "restart_decision"};

}  // namespace

const char* JobEventKindName(JobEventKind kind) { return detail::NameOf(kind, kKindNames); }

JobEventKind ParseJobEventKind(std::string_view name) {
  return detail::ParseName(name, kKindNames, JobEventKind::kUnknown);
}

std::string JobEventToJson(const JobEvent& e) {
  json j = {{"schema", SchemaId(kJobEventSchema)},
            {"kind", JobEventKindName(e.kind)},
            {"unix_ms", e.unix_ms},
            {"run_id", e.run_id},
            {"attempt", e.attempt}};
  if (e.rank >= 0) j["rank"] = e.rank;
  if (e.node_rank >= 0) j["node_rank"] = e.node_rank;
  if (!e.host.empty()) j["host"] = e.host;
  if (e.pid > 0) j["pid"] = e.pid;
  if (e.exit_code) j["exit_code"] = *e.exit_code;
  if (!e.signal.empty()) j["signal"] = e.signal;
  if (!e.message.empty()) j["message"] = e.message;
  return detail::Dump(j);
}

bool JobEventFromJson(std::string_view line, JobEvent* out) {
  json j = json::parse(line, nullptr, false);
  if (!j.is_object()) return false;
  std::string problem;
  if (CheckSchema(j, kJobEventSchema, &problem) == SchemaMatch::kOther) return false;
  JobEvent e;
  e.kind = ParseJobEventKind(detail::GetString(j, "kind"));
  e.unix_ms = detail::GetInt(j, "unix_ms", 0);
  e.run_id = detail::GetString(j, "run_id");
  e.attempt = detail::GetInt32(j, "attempt", 0);
  e.rank = detail::GetInt32(j, "rank", -1);
  e.node_rank = detail::GetInt32(j, "node_rank", -1);
  e.host = detail::GetString(j, "host");
  e.pid = detail::GetInt32(j, "pid", 0);
  if (j.contains("exit_code")) e.exit_code = detail::GetInt32(j, "exit_code", 0);
  e.signal = detail::GetString(j, "signal");
  e.message = detail::GetString(j, "message");
  *out = std::move(e);
  return true;
}

}  // namespace dlaunch::rundir
