#include "launcher/job/attempt_history.h"

#include <nlohmann/json.hpp>
#include <sstream>

namespace dlaunch::launcher {

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
