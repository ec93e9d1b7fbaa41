#include "launcher/job/cluster_env.h"

#include <algorithm>
#include <iostream>

namespace dlaunch::launcher {

PlacementRequest PlacementRequestFor(const LaunchOptions& o, NodeShare share, const EnvMap& env) {
  PlacementRequest req;
  req.gpu_binding = o.gpu_binding;
  req.numa_binding = o.numa_binding;
  req.virtual_local_rank = o.virtual_local_rank;
  req.nproc = o.nproc;
  req.share_index = share.index;
  req.share_count = share.count;
  if (auto it = env.find("CUDA_VISIBLE_DEVICES"); it != env.end())
    req.cuda_visible_devices = it->second;
  for (const auto& [k, v] : o.env)
    if (k == "CUDA_VISIBLE_DEVICES") req.cuda_visible_devices = v;
  return req;
}

std::vector<RankPlacement> PlaceRanks(const LaunchOptions& o, NodeShare share, const EnvMap& env) {
  auto placement = PlanPlacement(PlacementRequestFor(o, share, env), ReadTopology());
  if (std::any_of(placement.begin(), placement.end(), [](const RankPlacement& p) {
        return p.cuda_visible_devices || !p.cpus.empty();
      })) {
    std::cerr << "dlaunch: placement: " << FormatPlacement(placement) << std::endl;
  }
  return placement;
}

}  // namespace dlaunch::launcher
