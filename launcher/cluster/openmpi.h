// OpenMPI's mpirun: one launcher per slot, its world rank the node rank. mpirun gives no address
// for node 0, so the launchers agree on one over MPI itself (rendezvous/mpi_rendezvous.h).
#pragma once

#include <optional>

#include "launcher/cluster/cluster_place.h"

namespace dlaunch::launcher::cluster {

// Under mpirun (OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK set): node OMPI_COMM_WORLD_RANK of
// OMPI_COMM_WORLD_SIZE, no endpoint, its share of the machine from the local rank and size.
std::optional<ClusterPlace> DetectOpenMpi(const EnvMap& env);

// OMPI_COMM_WORLD_LOCAL_RANK of OMPI_COMM_WORLD_LOCAL_SIZE (two slots on one machine); not given
// without both.
Sourced<NodeShare> OpenMpiShare(const EnvMap& env);

}  // namespace dlaunch::launcher::cluster
