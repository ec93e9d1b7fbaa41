// NVIDIA's published compatibility facts, as data: the minimum Linux x86_64 driver of each CUDA
// toolkit release (the "CUDA Toolkit and Corresponding Driver Versions" table of the CUDA release
// notes) and the compute capabilities each CUDA major release can compile for. All lookups are
// pure.
#pragma once

#include <string>

namespace dlaunch::launcher {

// Driver versions are compared field by field: "525.60.13" < "530.30.02" < "530.30.10".
// Returns <0, 0, >0; a missing field counts as 0.
int CompareDriverVersions(const std::string& a, const std::string& b);

// The minimum driver for the GA release of CUDA `cuda_version` (1000*major + 10*minor), e.g.
// "530.30.02" for 12010. For a minor release newer than the table, the newest entry of the same
// major; "" for a major the table does not know.
std::string MinimumDriverForCuda(int cuda_version);

// The newest CUDA (1000*major + 10*minor) whose GA release runs on `driver_version` according to
// the table; 0 when the driver predates every entry or is not a version.
int NewestCudaForDriver(const std::string& driver_version);

// Compute capabilities (10*major + minor) the CUDA toolkit of `cuda_version` can build code for;
// false when the table does not know that release.
bool ComputeCapabilityRange(int cuda_version, int* min_cc, int* max_cc);

}  // namespace dlaunch::launcher
