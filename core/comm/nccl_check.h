// Shared by the NCCL communicator's source files (nccl_communicator.cc, nccl_graph.cc): the
// error checks and handle casts. Includes nccl.h and the CUDA runtime, so only files built with
// DLAUNCH_WITH_NCCL include it.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

// nccl-tests' NCCLCHECK / c10d's C10D_NCCL_CHECK: fail with file, line, the call and NCCL's own
// words. ncclInProgress is not an error on a non-blocking communicator; the caller handles it.
#define DLAUNCH_NCCL_CHECK(call, comm) \
  ::dlaunch::core::CheckNccl((call), (comm), #call, __FILE__, __LINE__)
#define DLAUNCH_CUDA_CHECK(call) ::dlaunch::core::CheckCuda((call), #call, __FILE__, __LINE__)

namespace dlaunch::core {

// Returns res when it is ncclSuccess or ncclInProgress; throws Error otherwise (kPeerGone for
// remote and system errors), with ncclGetLastError's text when comm is given.
ncclResult_t CheckNccl(ncclResult_t res, void* comm, const char* call, const char* file, int line);
// Throws Error (kOutOfMemory for a failed allocation) unless err is cudaSuccess.
void CheckCuda(cudaError_t err, const char* call, const char* file, int line);

inline ncclComm_t AsComm(void* p) { return static_cast<ncclComm_t>(p); }
inline cudaStream_t AsStream(void* p) { return static_cast<cudaStream_t>(p); }

}  // namespace dlaunch::core
