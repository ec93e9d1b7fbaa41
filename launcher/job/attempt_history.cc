#include "launcher/job/attempt_history.h"

#include <nlohmann/json.hpp>
#include <sstream>

namespace dlaunch::launcher {

nlohmann::json AttemptsJson(const std::vector<AttemptRecord>& attempts) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : attempts) {
    nlohmann::json j = {{"attempt", a.attempt},
                        {"restart_count", a.restart_count},
                        {"nnodes", a.nnodes},
                        {"world_size", a.world_size},
                        {"start_unix_ms", a.start_unix_ms},
                        {"exit_code", a.exit_code}};
    if (a.end_unix_ms) j["end_unix_ms"] = a.end_unix_ms;
    if (!a.error.empty()) j["error"] = a.error;
    if (!a.next.empty()) j["next"] = a.next;
    if (!a.folder.empty()) j["folder"] = a.folder;
    out.push_back(std::move(j));
  }
  return out;
}

std::string FormatAttemptStory(const std::vector<AttemptRecord>& attempts) {
  std::ostringstream out;
  out << "dlaunch: attempts:\n";
  for (const auto& a : attempts) {
    out << "  attempt " << a.attempt << " (restart " << a.restart_count << "): " << a.nnodes
        << " node" << (a.nnodes > 1 ? "s" : "") << ", " << a.world_size << " rank"
        << (a.world_size > 1 ? "s" : "") << ", "
        << (a.exit_code == 0  ? "ok"
            : a.error.empty() ? "exit code " + std::to_string(a.exit_code)
                              : a.error);
    if (a.next == "restart") out << " -> restarted";
    if (a.next == "rejoin") out << " -> went on without the lost node(s)";
    if (!a.folder.empty()) out << " (logs in " << a.folder << "/)";
    out << "\n";
  }
  return out.str();
}

}  // namespace dlaunch::launcher
