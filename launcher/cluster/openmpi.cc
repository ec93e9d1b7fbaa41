#include "launcher/cluster/openmpi.h"

#include "launcher/cluster/env_values.h"

namespace dlaunch::launcher::cluster {

Sourced<NodeShare> OpenMpiShare(const EnvMap& env) {
  const char* kIndex = "OMPI_COMM_WORLD_LOCAL_RANK";
  const char* kCount = "OMPI_COMM_WORLD_LOCAL_SIZE";
  if (!Find(env, kIndex) || !Find(env, kCount)) return {};
  const std::string from = std::string(kIndex) + ", " + kCount;
  const Sourced<int> index = CountVar(env, kIndex);
  const Sourced<int> count = CountVar(env, kCount);
  if (!index.error.empty()) return Sourced<NodeShare>::Bad(from, index.error);
  if (!count.error.empty()) return Sourced<NodeShare>::Bad(from, count.error);
  return Sourced<NodeShare>::Of(Normalized({*index.value, *count.value}), from);
}

std::optional<ClusterPlace> DetectOpenMpi(const EnvMap& env) {
  if (!Find(env, "OMPI_COMM_WORLD_SIZE") || !Find(env, "OMPI_COMM_WORLD_RANK")) {
    return std::nullopt;
  }
  ClusterPlace place;
  place.engine = Engine::kOpenMpi;
  place.nnodes = IntVar(env, "OMPI_COMM_WORLD_SIZE");
  place.node_rank = IntVar(env, "OMPI_COMM_WORLD_RANK");
  place.share = OpenMpiShare(env);
  return place;
}

}  // namespace dlaunch::launcher::cluster
