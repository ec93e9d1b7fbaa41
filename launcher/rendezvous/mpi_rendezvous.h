// Under mpirun with no --rdzv-endpoint, the launchers agree on node 0's coordinator address
// through MPI itself.
#pragma once

#include <string>

namespace dlaunch::launcher {

// Collective over MPI_COMM_WORLD: every launcher calls it; node 0's `proposal` is returned to
// all. Blocks until every launcher has called it. MPI is finalized before it returns, so no MPI
// state outlives it into forked ranks. Throws UsageError when dlaunch was built without MPI.
std::string AgreeOverMpi(const std::string& proposal);

}  // namespace dlaunch::launcher
