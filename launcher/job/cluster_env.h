// What the cluster's engine tells a launcher beyond the node's place (launcher/cluster/ reads
// that): where this launcher's ranks go on the machine, and Kubeflow's PET_* variables
// (torchrun's options, one variable each).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "launcher/cluster/cluster_place.h"
#include "launcher/options.h"
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

// Command-line tokens ({"PET_NNODES", "--nnodes=2"}: the variable and its token) for the torchrun
// options Kubeflow's PyTorchJob passes as PET_<OPTION> variables, for each option `given(name)`
// says the command line did not set: the command line wins. PET_MASTER_ADDR and PET_MASTER_PORT
// together give --rdzv-endpoint (torchrun's static rendezvous meets there). Boolean options take 1
// or 0; a variable set but empty is an error, as in torchrun (whose int("") fails). Throws
// UsageError naming the variable.
std::vector<std::pair<std::string, std::string>> KubeflowArgs(
    const EnvMap& env, const std::function<bool(const std::string&)>& given);

// The options KubeflowArgs may produce and the names each is given under on the command line.
struct PetOption {
  const char* variable;             // PET_NPROC_PER_NODE
  std::vector<std::string> option;  // nproc-per-node, nproc, nproc_per_node: first is used
  bool is_switch = false;           // takes no value: PET_X=1 sets it
};
const std::vector<PetOption>& PetOptions();

}  // namespace dlaunch::launcher
