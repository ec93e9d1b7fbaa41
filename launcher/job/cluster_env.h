// What the cluster's engine tells a launcher beyond the node's place (launcher/cluster/ reads
// that): where this launcher's ranks go on the machine.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "launcher/cli/options.h"
#include "launcher/cluster/cluster_place.h"
#include "launcher/supervision/placement.h"

namespace dlaunch::launcher {

using EnvMap = std::map<std::string, std::string>;

// Which of the node agents on this machine this one is (launcher/cluster/cluster_place.h).
using cluster::NodeShare;

// What PlanPlacement needs from the options, this launcher's `share` of the machine and the
// environment (the ranks' CUDA_VISIBLE_DEVICES: --env's, else the inherited one).
PlacementRequest PlacementRequestFor(const LaunchOptions& o, NodeShare share, const EnvMap& env);

// Each local rank's placement on this machine (ReadTopology), said on stderr when it binds
// anything. Throws UsageError for a binding the machine cannot give.
std::vector<RankPlacement> PlaceRanks(const LaunchOptions& o, NodeShare share, const EnvMap& env);

}  // namespace dlaunch::launcher
