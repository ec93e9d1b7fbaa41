#include "launcher/job/single_node_role.h"

namespace dlaunch::launcher {
namespace {

// The ranks' MASTER_ADDR on one node: the endpoint's host when it names this machine, else
// --master-addr's.
std::string MasterAddr(const LaunchOptions& o, const NodeSetup& setup) {
  return setup.master_addr.empty() ? o.master_addr : setup.master_addr;
}

}  // namespace

SingleNodeRole::SingleNodeRole(const LaunchOptions& o, const NodeSetup& setup)
    : NodeZeroRole(o, setup, MasterAddr(o, setup)) {
  master_addr_ = MasterAddr(o, setup);
}

JobIdentity SingleNodeRole::Prepare() {
  Serve("127.0.0.1:0");
  return {run_id_,      master_addr_,
          master_port_, "127.0.0.1:" + std::to_string(coordinator_->port()),
          Membership{}, false};
}

bool SingleNodeRole::Open(JobPlan* plan, Supervisor* supervisor) {
  supervisor_ = supervisor;
  world_size_ = plan->world_size();
  coordinator_->Watch(*plan, supervisor);
  return true;
}

}  // namespace dlaunch::launcher
