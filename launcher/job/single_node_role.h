// The whole job on this machine: node 0 with no other node, its coordinator on loopback only.
#pragma once

#include "launcher/job/node_zero_role.h"

namespace dlaunch::launcher {

class SingleNodeRole : public NodeZeroRole {
 public:
  SingleNodeRole(const LaunchOptions& o, const NodeSetup& setup);

  JobIdentity Prepare() override;
  bool Open(JobPlan* plan, Supervisor* supervisor) override;
  void Conclude(AttemptReport*, SummaryInfo*) override {}  // no other node has a say
};

}  // namespace dlaunch::launcher
