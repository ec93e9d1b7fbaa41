// Kubeflow's PyTorchJob: every pod runs torchrun's command line with its options as PET_<OPTION>
// variables (PET_NNODES, PET_NODE_RANK, ...) and the master pod's address as PET_MASTER_ADDR and
// PET_MASTER_PORT, or, from older operators, MASTER_ADDR and MASTER_PORT.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/cluster/cluster_place.h"

namespace dlaunch::launcher::cluster {

// In a PyTorchJob pod (PET_NNODES set): nnodes from PET_NNODES (N or MIN:MAX), the node rank from
// PET_NODE_RANK (absent in an elastic job: join order), the endpoint from PET_RDZV_ENDPOINT, else
// the master's address, the run id from PET_RDZV_ID. A variable set but empty is an error, as in
// torchrun (whose int("") fails). The endpoint and run id are checked where they are used (their
// errors then name `source`). The other PET_* variables are torchrun options, not the place:
// KubeflowArgs gives them to the command line.
std::optional<ClusterPlace> DetectKubeflow(const EnvMap& env);

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

}  // namespace dlaunch::launcher::cluster
