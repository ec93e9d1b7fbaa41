#include "core/run_dir/straggler_verdicts.h"

#include <nlohmann/json.hpp>

#include "core/run_dir/json_fields.h"

namespace dlaunch::rundir {

using nlohmann::json;

json StragglersToJson(const std::vector<StragglerVerdict>& verdicts) {
  json out = json::array();
  for (const StragglerVerdict& v : verdicts) {
    out.push_back({{"rank", v.rank},
                   {"host", v.host},
                   {"relative", v.relative},
                   {"step_ms_p50", v.step_ms_p50},
                   {"median_ms", v.median_ms},
                   {"window_steps", v.window_steps},
                   {"last_share", v.last_share},
                   {"start_unix_ms", v.start_unix_ms},
                   {"end_unix_ms", v.end_unix_ms},
                   {"start_step", v.start_step},
                   {"end_step", v.end_step},
                   {"text", v.text}});
  }
  return out;
}

std::vector<StragglerVerdict> StragglersFromJson(const json& doc, const char* key) {
  std::vector<StragglerVerdict> out;
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_array()) return out;
  for (const json& v : *it) {
    if (!v.is_object()) continue;
    StragglerVerdict s;
    s.rank = detail::GetInt32(v, "rank", -1);
    s.host = detail::GetString(v, "host");
    s.relative = detail::GetDouble(v, "relative", 0);
    s.step_ms_p50 = detail::GetDouble(v, "step_ms_p50", 0);
    s.median_ms = detail::GetDouble(v, "median_ms", 0);
    s.window_steps = detail::GetInt(v, "window_steps", 0);
    s.last_share = detail::GetDouble(v, "last_share", -1);
    s.start_unix_ms = detail::GetInt(v, "start_unix_ms", 0);
    s.end_unix_ms = detail::GetInt(v, "end_unix_ms", 0);
    s.start_step = detail::GetInt(v, "start_step", -1);
    s.end_step = detail::GetInt(v, "end_step", -1);
    s.text = detail::GetString(v, "text");
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace dlaunch::rundir
