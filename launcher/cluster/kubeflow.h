// Kubeflow's PyTorchJob: every pod runs torchrun's command line with its options as PET_<OPTION>
// variables (PET_NNODES, PET_NODE_RANK, ...) and the master pod's address as PET_MASTER_ADDR and
// PET_MASTER_PORT, or, from older operators, MASTER_ADDR and MASTER_PORT.
#pragma once

#include <optional>

#include "launcher/cluster/cluster_place.h"

namespace dlaunch::launcher::cluster {

// In a PyTorchJob pod (PET_NNODES set): nnodes from PET_NNODES (N or MIN:MAX), the node rank from
// PET_NODE_RANK (absent in an elastic job: join order), the endpoint from PET_RDZV_ENDPOINT, else
// the master's address, the run id from PET_RDZV_ID. A variable set but empty is an error, as in
// torchrun (whose int("") fails). The endpoint and run id are checked where they are used (their
// errors then name `source`). The other PET_* variables are torchrun options, not the place.
std::optional<ClusterPlace> DetectKubeflow(const EnvMap& env);

}  // namespace dlaunch::launcher::cluster
