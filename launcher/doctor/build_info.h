// What dlaunch was built with: CUDA toolkit and NCCL versions from their headers (when the NCCL
// backend is built), libtorch's version and CUDA from its installed files at configure time.
#pragma once

#include <string>
#include <vector>

#include "launcher/doctor/nvidia_libraries.h"

namespace dlaunch::launcher {

struct BuildInfo {
  std::string dlaunch_version;
  int cuda_compile_version = 0;  // CUDART_VERSION, 0 without the NCCL backend
  int nccl_compile_version = 0;  // NCCL_VERSION_CODE, 0 without the NCCL backend
  bool torch_built_in = false;
  std::string torch_version;
  std::string torch_cuda;  // "" CPU-only, "?" CUDA of unknown version
  std::string torch_source;
  std::vector<std::string> torch_cuda_arch_list;
  NvidiaLibraryPaths library_paths;
};

// Does not block.
const BuildInfo& GetBuildInfo();

}  // namespace dlaunch::launcher
