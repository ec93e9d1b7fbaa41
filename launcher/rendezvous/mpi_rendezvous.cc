#include "launcher/rendezvous/mpi_rendezvous.h"

#include "core/error.h"

#ifdef DLAUNCH_HAVE_MPI
#include <mpi.h>

#include <cstring>
#endif

namespace dlaunch::launcher {

std::string AgreeOverMpi(const std::string& proposal) {
#ifdef DLAUNCH_HAVE_MPI
  char buf[512] = {};
  std::strncpy(buf, proposal.c_str(), sizeof(buf) - 1);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
    throw Error(ErrorKind::kInternal, "MPI_Init failed");
  }
  const int rc = MPI_Bcast(buf, sizeof(buf), MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  if (rc != MPI_SUCCESS) throw Error(ErrorKind::kInternal, "MPI_Bcast of the endpoint failed");
  return buf;
#else
  (void)proposal;
  throw UsageError("this dlaunch was built without MPI: give --rdzv-endpoint host:port");
#endif
}

}  // namespace dlaunch::launcher
