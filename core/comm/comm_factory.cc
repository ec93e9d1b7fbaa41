// The one place that knows which backends this build has.
#include <cstdlib>

#include "core/comm/comm_options.h"
#include "core/comm/gloo_communicator.h"
#include "core/error.h"

#if DLAUNCH_WITH_NCCL
#include "core/comm/nccl_communicator.h"
#endif

namespace dlaunch::core {

bool NcclAvailable() {
#if DLAUNCH_WITH_NCCL
  return CudaDeviceCount() > 0;
#else
  return false;
#endif
}

std::string ResolveBackend(const std::string& backend) {
  if (backend == "auto") return NcclAvailable() ? "nccl" : "gloo";
  if (backend == "gloo" || backend == "nccl") return backend;
  throw UsageError("unknown backend '" + backend + "' (expected auto, gloo or nccl)");
}

void CheckTransport(const std::string& transport) {
  if (transport == "auto" || transport == "shm" || transport == "tcp") return;
  throw UsageError("unknown transport '" + transport + "' (expected auto, shm or tcp)");
}

std::unique_ptr<Communicator> MakeCommunicator(const CommOptions& options) {
  const std::string backend = ResolveBackend(options.backend);
  CheckTransport(options.transport);
  if (backend == "nccl" && options.transport == "shm") {
    throw UsageError("transport shm is the gloo backend's; nccl picks its own paths");
  }
  if (options.size > 1 && !options.store) {
    throw UsageError("a communicator of " + std::to_string(options.size) +
                     " ranks needs a store for its rendezvous");
  }
  if (backend == "gloo") return std::make_unique<GlooCommunicator>(options);
#if DLAUNCH_WITH_NCCL
  if (!NcclAvailable()) throw UsageError("backend nccl: no CUDA device is visible");
  return std::make_unique<NcclCommunicator>(options);
#else
  throw UsageError("backend nccl: this build of dlaunch has no NCCL support");
#endif
}

}  // namespace dlaunch::core
