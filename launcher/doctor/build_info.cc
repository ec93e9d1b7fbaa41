#include "launcher/doctor/build_info.h"

#include <sstream>

#include "launcher/doctor/build_config.h"

// The one place that reads NCCL's and CUDA's headers; the rest of dlaunch_doctor is free of them.
#ifdef DLAUNCH_WITH_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace dlaunch::launcher {
namespace {

std::vector<std::string> SplitArchList(const std::string& text) {
  // TORCH_CUDA_ARCH_LIST style: "8.0;8.6;9.0+PTX" or space separated.
  std::vector<std::string> out;
  std::string item;
  for (char c : text + ";") {
    if (c == ';' || c == ' ' || c == ',') {
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  return out;
}

BuildInfo Make() {
  BuildInfo info;
  info.dlaunch_version = DLAUNCH_DOCTOR_VERSION;
#ifdef DLAUNCH_WITH_NCCL
  info.cuda_compile_version = CUDART_VERSION;
  info.nccl_compile_version = NCCL_VERSION_CODE;
  info.library_paths.cudart_major = CUDART_VERSION / 1000;
#endif
  info.torch_built_in = DLAUNCH_DOCTOR_TORCH_BUILT_IN != 0;
  info.torch_version = DLAUNCH_DOCTOR_TORCH_VERSION;
  info.torch_cuda = DLAUNCH_DOCTOR_TORCH_CUDA;
  info.torch_source = DLAUNCH_DOCTOR_TORCH_SOURCE;
  info.torch_cuda_arch_list = SplitArchList(DLAUNCH_DOCTOR_TORCH_ARCH_LIST);
  info.library_paths.cuda_lib_dir = DLAUNCH_DOCTOR_CUDA_LIB_DIR;
  info.library_paths.nccl_library = DLAUNCH_DOCTOR_NCCL_LIBRARY;
  return info;
}

}  // namespace

const BuildInfo& GetBuildInfo() {
  static const BuildInfo info = Make();
  return info;
}

}  // namespace dlaunch::launcher
