// Run-time probing of the NVIDIA libraries with dlopen: libnvidia-ml (NVML), libcuda, libcudart,
// libnccl and libcudnn. Nothing here is linked, so dlaunch starts on machines without any of
// them; each missing library leaves its facts empty and says why.
#pragma once

#include <string>

#include "launcher/doctor/doctor_facts.h"

namespace dlaunch::launcher {

struct NvidiaLibraryPaths {
  int cudart_major = 0;      // soname major of the runtime dlaunch was built against (13 here)
  std::string cuda_lib_dir;  // the toolkit's library folder found at configure time, as fallback
  std::string nccl_library;  // NCCL_LIBRARY found at configure time, as fallback
};

class NvidiaLibraries {
 public:
  // Fills the driver, GPU, process, CUDA runtime, NCCL and cuDNN run-time fields of `facts`.
  // Blocks while the libraries load and NVML initialises: well under a second on most machines,
  // a few seconds on a many-GPU machine without persistence mode. Calls cuInit only when NVML is
  // missing, because initialising CUDA is the slow part and NVML tells the same.
  static void Probe(const NvidiaLibraryPaths& paths, bool list_processes, DoctorFacts* facts);
};

}  // namespace dlaunch::launcher
