// The NCCL communicator's decisions that need no GPU, kept apart from nccl_communicator.cc (which
// needs nccl.h and a device) so that they build and are tested everywhere.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/comm/communicator.h"

namespace dlaunch::core {

// NCCL's version code (nccl.h's NCCL_VERSION): 2.28.9 is 22809, 2.8.4 is 2804.
constexpr int NcclVersionCode(int major, int minor, int patch) {
  return (major <= 2 && minor <= 8) ? major * 1000 + minor * 100 + patch
                                    : major * 10000 + minor * 100 + patch;
}
// "2.28.9" for 22809.
std::string NcclVersionText(int code);

// Why `reg` cannot be had with dlaunch built against NCCL `header_version` and running on
// `runtime_version` (ncclGetVersion), or "" when it can. Buffer registration (ncclCommRegister)
// came with NCCL 2.19, symmetric windows (ncclCommWindowRegister) with 2.27; nccl-tests quietly
// falls back, dlaunch refuses instead.
std::string RegistrationRefusal(BufferRegistration reg, int header_version, int runtime_version);

// "none", "local" or "symmetric" (nccl-tests' -R 0, 1, 2).
const char* RegistrationName(BufferRegistration reg);

// Byte offsets of consecutive blocks of counts[p] elements of elt_size bytes each.
std::vector<size_t> BlockOffsets(const std::vector<size_t>& counts, size_t elt_size);

}  // namespace dlaunch::core
