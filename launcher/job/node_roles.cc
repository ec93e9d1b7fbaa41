// What the node roles share, and the choice among them. Each role has a file of its own:
// node_zero_role (node 0, alone or with others), single_node_role, coordinator_host_role and
// joining_node_role.
#include "launcher/job/node_roles.h"

#include "core/error.h"
#include "launcher/job/coordinator_host_role.h"
#include "launcher/job/joining_node_role.h"
#include "launcher/job/single_node_role.h"
#include "launcher/launch_checks.h"
#include "launcher/rendezvous/ports.h"

namespace dlaunch::launcher {

void MarkInterrupted(AttemptReport* report, int signal, const std::string& where) {
  report->exit_code = 128 + signal;
  report->error = "interrupted by " + SignalName(signal) + " " + where;
  report->result.interrupted_by = signal;
}

std::string JobIdOf(const LaunchOptions& o) {
  if (!o.job_id.empty()) return o.job_id;
  return o.run_id.empty() ? "" : "run id '" + o.run_id + "'";
}

std::chrono::milliseconds JoinTimeout(const LaunchOptions& o) {
  return o.join_timeout.count() > 0 ? o.join_timeout : o.rdzv_timeout;
}

std::string Plural(int n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

std::unique_ptr<NodeRole> MakeNodeRole(const LaunchOptions& options, NodeSetup* setup,
                                       const std::string& host) {
  switch (setup->role) {
    case NodeRoleKind::kSingleNode:
      return std::make_unique<SingleNodeRole>(options, *setup);
    case NodeRoleKind::kCoordinatorHost:
      return std::make_unique<CoordinatorHostRole>(options, *setup, host);
    case NodeRoleKind::kJoiningNode:
      return std::make_unique<JoiningNodeRole>(options, *setup, host);
    case NodeRoleKind::kElected: {
      const auto [endpoint_host, port] = SplitEndpoint(setup->endpoint);
      // (A port already taken is the usual case for every launcher but the first.)
      if (IsLocalAddress(endpoint_host) && PortIsFree("0.0.0.0", port)) {
        try {
          auto zero = std::make_unique<CoordinatorHostRole>(options, *setup, host);
          zero->Listen();
          setup->role = NodeRoleKind::kCoordinatorHost;
          return zero;
        } catch (const UsageError&) {
          // Another launcher listens on the endpoint already: it is node 0, this one joins.
        }
      }
      setup->role = NodeRoleKind::kJoiningNode;
      return std::make_unique<JoiningNodeRole>(options, *setup, host);
    }
  }
  throw Error(ErrorKind::kInternal, "unknown node role");
}

}  // namespace dlaunch::launcher
