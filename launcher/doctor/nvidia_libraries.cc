#include "launcher/doctor/nvidia_libraries.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "launcher/doctor/system_parsers.h"

namespace dlaunch::launcher {
namespace {

// The few ABI pieces used from each library, declared here instead of including their headers so
// the build needs none of them. These signatures and layouts are stable across releases.
using CuResult = int;
using CuInitFn = CuResult (*)(unsigned int);
using CuIntOutFn = CuResult (*)(int*);
using CuDeviceGetFn = CuResult (*)(int*, int);
using CuDeviceGetNameFn = CuResult (*)(char*, int, int);
using CuDeviceGetAttributeFn = CuResult (*)(int*, int, int);
using CuDeviceTotalMemFn = CuResult (*)(size_t*, int);
using CuDeviceGetPciBusIdFn = CuResult (*)(char*, int, int);
using CuGetErrorStringFn = CuResult (*)(CuResult, const char**);
constexpr int kCuAttrComputeCapabilityMajor = 75;
constexpr int kCuAttrComputeCapabilityMinor = 76;
constexpr CuResult kCudaErrorStubLibrary = 34;

using NvmlReturn = int;
using NvmlDevice = void*;
using NvmlVoidFn = NvmlReturn (*)();
using NvmlStringFn = NvmlReturn (*)(char*, unsigned int);
using NvmlIntOutFn = NvmlReturn (*)(int*);
using NvmlUintOutFn = NvmlReturn (*)(unsigned int*);
using NvmlHandleFn = NvmlReturn (*)(unsigned int, NvmlDevice*);
using NvmlDeviceStringFn = NvmlReturn (*)(NvmlDevice, char*, unsigned int);
using NvmlDeviceCcFn = NvmlReturn (*)(NvmlDevice, int*, int*);
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
using NvmlDeviceMemoryFn = NvmlReturn (*)(NvmlDevice, NvmlMemory*);
struct NvmlProcessInfoV1 {
  unsigned int pid;
  unsigned long long used_gpu_memory;
};
struct NvmlProcessInfoV2 {  // the layout of the _v2 and _v3 process queries
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
using NvmlProcessesV1Fn = NvmlReturn (*)(NvmlDevice, unsigned int*, NvmlProcessInfoV1*);
using NvmlProcessesV2Fn = NvmlReturn (*)(NvmlDevice, unsigned int*, NvmlProcessInfoV2*);
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlInsufficientSize = 7;
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;

using IntOutFn = int (*)(int*);
using SizeFn = size_t (*)();

// Opens the first loadable candidate; records the loaded path and the last dlerror.
void* OpenFirst(const std::vector<std::string>& candidates, std::string* path, std::string* error) {
  for (const std::string& name : candidates) {
    if (name.empty()) continue;
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      struct link_map* map = nullptr;
      if (path != nullptr) {
        *path = (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name)
                    ? map->l_name
                    : name;
      }
      return handle;
    }
    const char* why = dlerror();
    if (error != nullptr && why != nullptr) *error = why;
  }
  return nullptr;
}

template <typename Fn>
Fn Symbol(void* handle, const char* name) {
  return handle == nullptr ? nullptr : reinterpret_cast<Fn>(dlsym(handle, name));
}

std::string ProcessCommand(int64_t pid) {
  std::string comm;
  if (!ReadSmallTextFile("/proc/" + std::to_string(pid) + "/comm", &comm)) return "";
  while (!comm.empty() && (comm.back() == '\n' || comm.back() == '\r')) comm.pop_back();
  return comm;
}

void ProbeProcesses(void* nvml, NvmlDevice device, int index, DoctorFacts* facts) {
  auto v3 = Symbol<NvmlProcessesV2Fn>(nvml, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (v3 == nullptr)
    v3 = Symbol<NvmlProcessesV2Fn>(nvml, "nvmlDeviceGetComputeRunningProcesses_v2");
  auto v1 = Symbol<NvmlProcessesV1Fn>(nvml, "nvmlDeviceGetComputeRunningProcesses");
  std::vector<std::pair<unsigned int, unsigned long long>> found;
  if (v3 != nullptr) {
    std::vector<NvmlProcessInfoV2> infos(64);
    unsigned int count = static_cast<unsigned int>(infos.size());
    NvmlReturn rc = v3(device, &count, infos.data());
    if (rc == kNvmlInsufficientSize) {
      infos.resize(count + 16);
      count = static_cast<unsigned int>(infos.size());
      rc = v3(device, &count, infos.data());
    }
    if (rc != kNvmlSuccess) return;
    for (unsigned int i = 0; i < count; ++i)
      found.emplace_back(infos[i].pid, infos[i].used_gpu_memory);
  } else if (v1 != nullptr) {
    std::vector<NvmlProcessInfoV1> infos(64);
    unsigned int count = static_cast<unsigned int>(infos.size());
    if (v1(device, &count, infos.data()) != kNvmlSuccess) return;
    for (unsigned int i = 0; i < count; ++i)
      found.emplace_back(infos[i].pid, infos[i].used_gpu_memory);
  } else {
    return;
  }
  facts->gpu_processes_known = true;
  for (const auto& [pid, used] : found) {
    GpuProcessFacts p;
    p.gpu_index = index;
    p.pid = pid;
    p.used_bytes = used == kNvmlValueNotAvailable ? 0 : used;
    p.command = ProcessCommand(pid);
    facts->gpu_processes.push_back(p);
  }
}

// NVML: driver version, driver CUDA version, GPUs and their processes, without initialising CUDA.
bool ProbeNvml(bool list_processes, DoctorFacts* facts, std::string* error) {
  std::string path;
  void* nvml = OpenFirst({"libnvidia-ml.so.1"}, &path, error);
  if (nvml == nullptr) return false;
  auto init = Symbol<NvmlVoidFn>(nvml, "nvmlInit_v2");
  auto shutdown = Symbol<NvmlVoidFn>(nvml, "nvmlShutdown");
  if (init == nullptr || shutdown == nullptr) {
    *error = "libnvidia-ml.so.1 has no nvmlInit_v2";
    return false;
  }
  NvmlReturn rc = init();
  if (rc != kNvmlSuccess) {
    *error = "nvmlInit failed with NVML error " + std::to_string(rc) +
             (rc == 9 ? " (driver not loaded)" : "");
    return false;
  }
  char text[96] = {0};
  if (auto fn = Symbol<NvmlStringFn>(nvml, "nvmlSystemGetDriverVersion");
      fn != nullptr && fn(text, sizeof(text)) == kNvmlSuccess && facts->driver_version.empty()) {
    facts->driver_version = text;
    facts->driver_source = "nvml";
  }
  int cuda = 0;
  auto cuda_fn = Symbol<NvmlIntOutFn>(nvml, "nvmlSystemGetCudaDriverVersion_v2");
  if (cuda_fn == nullptr) cuda_fn = Symbol<NvmlIntOutFn>(nvml, "nvmlSystemGetCudaDriverVersion");
  if (cuda_fn != nullptr && cuda_fn(&cuda) == kNvmlSuccess && facts->cuda_driver_version == 0) {
    facts->cuda_driver_version = cuda;
  }
  unsigned int count = 0;
  auto count_fn = Symbol<NvmlUintOutFn>(nvml, "nvmlDeviceGetCount_v2");
  auto handle_fn = Symbol<NvmlHandleFn>(nvml, "nvmlDeviceGetHandleByIndex_v2");
  auto name_fn = Symbol<NvmlDeviceStringFn>(nvml, "nvmlDeviceGetName");
  auto uuid_fn = Symbol<NvmlDeviceStringFn>(nvml, "nvmlDeviceGetUUID");
  auto cc_fn = Symbol<NvmlDeviceCcFn>(nvml, "nvmlDeviceGetCudaComputeCapability");
  auto mem_fn = Symbol<NvmlDeviceMemoryFn>(nvml, "nvmlDeviceGetMemoryInfo");
  if (count_fn == nullptr || handle_fn == nullptr || count_fn(&count) != kNvmlSuccess) {
    *error = "NVML could not count GPUs";
    shutdown();
    return false;
  }
  for (unsigned int i = 0; i < count; ++i) {
    NvmlDevice device = nullptr;
    if (handle_fn(i, &device) != kNvmlSuccess) continue;
    GpuFacts gpu;
    gpu.index = static_cast<int>(i);
    char buf[128] = {0};
    if (name_fn != nullptr && name_fn(device, buf, sizeof(buf)) == kNvmlSuccess) gpu.name = buf;
    std::memset(buf, 0, sizeof(buf));
    if (uuid_fn != nullptr && uuid_fn(device, buf, sizeof(buf)) == kNvmlSuccess) gpu.uuid = buf;
    if (cc_fn != nullptr) cc_fn(device, &gpu.cc_major, &gpu.cc_minor);
    NvmlMemory memory{};
    if (mem_fn != nullptr && mem_fn(device, &memory) == kNvmlSuccess) {
      gpu.memory_total_bytes = memory.total;
      gpu.memory_used_bytes = memory.used;
    }
    facts->gpus.push_back(gpu);
    if (list_processes) ProbeProcesses(nvml, device, gpu.index, facts);
  }
  facts->gpu_source = "nvml";
  if (count == 0) facts->gpu_error = "NVML lists no GPU";
  shutdown();
  return true;
}

std::string CuErrorText(void* cuda, CuResult rc) {
  const char* text = nullptr;
  auto fn = Symbol<CuGetErrorStringFn>(cuda, "cuGetErrorString");
  if (fn != nullptr && fn(rc, &text) == 0 && text != nullptr) return text;
  return "CUDA driver error " + std::to_string(rc);
}

// libcuda: the driver's CUDA version always; GPUs only when NVML could not list them.
void ProbeLibcuda(bool need_gpus, DoctorFacts* facts) {
  std::string path, error;
  void* cuda = OpenFirst({"libcuda.so.1"}, &path, &error);
  if (cuda == nullptr) {
    facts->libcuda_error = "libcuda.so.1 not loadable: " + error;
    return;
  }
  facts->libcuda_loaded = true;
  int version = 0;
  if (auto fn = Symbol<CuIntOutFn>(cuda, "cuDriverGetVersion");
      fn != nullptr && fn(&version) == 0) {
    if (version > 0) facts->cuda_driver_version = version;
  }
  if (!need_gpus) return;
  auto init = Symbol<CuInitFn>(cuda, "cuInit");
  if (init == nullptr) return;
  // Unlike NVML, cuInit numbers only the GPUs CUDA_VISIBLE_DEVICES leaves visible; Verdict knows
  // (gpu_source "libcuda"). The variable is not touched here: other threads may read it.
  CuResult rc = init(0);
  if (rc != 0) {
    facts->gpu_error = "cuInit failed: " + CuErrorText(cuda, rc);
    if (rc == kCudaErrorStubLibrary) {
      facts->libcuda_loaded = false;
      facts->libcuda_error = "libcuda.so.1 is the toolkit's stub, not the driver's library";
    }
    return;
  }
  auto count_fn = Symbol<CuIntOutFn>(cuda, "cuDeviceGetCount");
  auto get_fn = Symbol<CuDeviceGetFn>(cuda, "cuDeviceGet");
  auto name_fn = Symbol<CuDeviceGetNameFn>(cuda, "cuDeviceGetName");
  auto attr_fn = Symbol<CuDeviceGetAttributeFn>(cuda, "cuDeviceGetAttribute");
  auto mem_fn = Symbol<CuDeviceTotalMemFn>(cuda, "cuDeviceTotalMem_v2");
  auto bus_fn = Symbol<CuDeviceGetPciBusIdFn>(cuda, "cuDeviceGetPCIBusId");
  int count = 0;
  if (count_fn == nullptr || get_fn == nullptr || count_fn(&count) != 0) return;
  for (int i = 0; i < count; ++i) {
    int device = 0;
    if (get_fn(&device, i) != 0) continue;
    GpuFacts gpu;
    gpu.index = i;
    char buf[128] = {0};
    if (name_fn != nullptr && name_fn(buf, sizeof(buf), device) == 0) gpu.name = buf;
    if (attr_fn != nullptr) {
      attr_fn(&gpu.cc_major, kCuAttrComputeCapabilityMajor, device);
      attr_fn(&gpu.cc_minor, kCuAttrComputeCapabilityMinor, device);
    }
    size_t total = 0;
    if (mem_fn != nullptr && mem_fn(&total, device) == 0) gpu.memory_total_bytes = total;
    std::memset(buf, 0, sizeof(buf));
    if (bus_fn != nullptr && bus_fn(buf, sizeof(buf), device) == 0) gpu.pci_bus_id = buf;
    facts->gpus.push_back(gpu);
  }
  facts->gpu_source = "libcuda";
}

}  // namespace

void NvidiaLibraries::Probe(const NvidiaLibraryPaths& paths, bool list_processes,
                            DoctorFacts* facts) {
  std::string nvml_error;
  bool have_nvml = ProbeNvml(list_processes, facts, &nvml_error);
  ProbeLibcuda(!have_nvml && (facts->proc_driver_present || !facts->driver_version.empty()), facts);
  if (!have_nvml && facts->gpu_error.empty() && facts->gpus.empty()) facts->gpu_error = nvml_error;

  std::string dir = paths.cuda_lib_dir.empty() ? "" : paths.cuda_lib_dir + "/";
  std::vector<std::string> cudart_names;
  if (paths.cudart_major > 0) {
    std::string soname = "libcudart.so." + std::to_string(paths.cudart_major);
    cudart_names = {soname, dir.empty() ? "" : dir + soname};
  } else {
    cudart_names = {"libcudart.so"};
  }
  std::string error;
  if (void* cudart = OpenFirst(cudart_names, &facts->cudart_library, &error)) {
    int version = 0;
    if (auto fn = Symbol<IntOutFn>(cudart, "cudaRuntimeGetVersion"); fn && fn(&version) == 0) {
      facts->cuda_runtime_version = version;
    }
  }
  if (void* nccl = OpenFirst({"libnccl.so.2", paths.nccl_library}, &facts->nccl_library, &error)) {
    int version = 0;
    if (auto fn = Symbol<IntOutFn>(nccl, "ncclGetVersion"); fn && fn(&version) == 0) {
      facts->nccl_runtime_version = version;
    }
  }
  if (void* cudnn =
          OpenFirst({"libcudnn.so.9", "libcudnn.so.8", dir.empty() ? "" : dir + "libcudnn.so"},
                    &facts->cudnn_library, &error)) {
    if (auto fn = Symbol<SizeFn>(cudnn, "cudnnGetVersion")) {
      facts->cudnn_version = static_cast<int>(fn());
    }
  }
}

}  // namespace dlaunch::launcher
