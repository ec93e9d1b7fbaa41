// What `dlaunch doctor` knows about one machine: a plain struct filled by Probe and judged by
// Verdict. Keeping the facts separate from the judging lets tests feed fixtures (JSON or parsed
// /proc text) to the verdict without the machine having a GPU, a driver or any library.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/doctor/python_probe.h"

namespace dlaunch::launcher {

struct GpuFacts {
  int index =
      0;  // physical index (NVML order), which is what CUDA_VISIBLE_DEVICES numbers refer to
  std::string name;
  std::string uuid;  // "GPU-xxxxxxxx-...", as nvidia-smi -L prints it
  std::string pci_bus_id;
  int cc_major = 0;  // compute capability; 0.0 = unknown
  int cc_minor = 0;
  uint64_t memory_total_bytes = 0;
  uint64_t memory_used_bytes = 0;
};

// A process holding GPU memory; usually an orphan of an earlier run when nothing else is running.
struct GpuProcessFacts {
  int gpu_index = 0;
  int64_t pid = 0;
  uint64_t used_bytes = 0;
  std::string command;  // from /proc/<pid>/comm; "" when the pid is in another PID namespace
};

struct NetInterfaceFacts {
  std::string name;
  bool up = false;
  bool loopback = false;
  std::vector<std::string> ipv4;  // dotted quads
  std::vector<std::string> ipv6;  // link-local ones excluded: NCCL does not use them either
};

// A resource limit as getrlimit reports it; `known` is false when it could not be read.
struct LimitFacts {
  bool known = false;
  bool unlimited = false;
  uint64_t soft = 0;
  uint64_t hard = 0;
  bool hard_unlimited = false;
};

// Versions are kept as the libraries report them: CUDA as 1000*major + 10*minor (12010 = 12.1),
// NCCL as its NCCL_VERSION_CODE (22809 = 2.28.9), cuDNN as CUDNN_VERSION; 0 means "not found".
struct DoctorFacts {
  // Host.
  std::string hostname;
  std::string os;      // PRETTY_NAME from /etc/os-release
  std::string kernel;  // uname -r
  std::string cpu_model;
  int cpu_count = 0;
  uint64_t memory_total_bytes = 0;
  uint64_t memory_available_bytes = 0;

  // NVIDIA driver. driver_version is the kernel module's ("535.104.05"); "" when absent.
  std::string driver_version;
  std::string driver_source;         // where driver_version came from
  bool proc_driver_present = false;  // /proc/driver/nvidia/version exists (kernel module loaded)
  bool libcuda_loaded = false;
  std::string libcuda_error;    // why libcuda.so.1 could not be used, when it could not
  int cuda_driver_version = 0;  // newest CUDA the driver supports (cuDriverGetVersion)

  // CUDA runtime: what dlaunch was compiled against and what libcudart loads at run time.
  int cuda_compile_version = 0;
  int cuda_runtime_version = 0;
  std::string cudart_library;

  // NCCL and cuDNN.
  int nccl_compile_version = 0;
  int nccl_runtime_version = 0;
  std::string nccl_library;
  int cudnn_version = 0;
  std::string cudnn_library;

  // libtorch the trainer was built with; torch_cuda "" = CPU-only build, "?" = CUDA of unknown
  // version. torch_cuda_arch_list is empty when the build's arch list is not known.
  bool torch_built_in = false;
  std::string torch_version;
  std::string torch_cuda;
  std::string torch_source;
  std::vector<std::string> torch_cuda_arch_list;

  // GPUs (physical, regardless of CUDA_VISIBLE_DEVICES) and who holds their memory.
  std::vector<GpuFacts> gpus;
  std::string gpu_source;  // "nvml", "libcuda" or ""
  std::string gpu_error;   // why GPUs could not be listed
  bool gpu_processes_known = false;
  std::vector<GpuProcessFacts> gpu_processes;

  // Limits and shared memory. shm sizes are -1 when /dev/shm is missing.
  int64_t shm_total_bytes = -1;
  int64_t shm_available_bytes = -1;
  LimitFacts memlock;
  LimitFacts nofile;
  std::vector<std::string> rdma_devices;  // /sys/class/infiniband entries (IB or RoCE)

  std::vector<NetInterfaceFacts> interfaces;
  // NCCL_*, TORCH_NCCL_*, CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, GLOO_SOCKET_IFNAME.
  std::map<std::string, std::string> env;

  // The interpreter the ranks of a Python job run and its torch (empty interpreter: not probed).
  PythonFacts python;
};

// JSON forms (missing keys keep their defaults, so fixtures name only what they are about).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GpuFacts, index, name, uuid, pci_bus_id, cc_major,
                                                cc_minor, memory_total_bytes, memory_used_bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GpuProcessFacts, gpu_index, pid, used_bytes,
                                                command)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(NetInterfaceFacts, name, up, loopback, ipv4, ipv6)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LimitFacts, known, unlimited, soft, hard,
                                                hard_unlimited)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(
    DoctorFacts, hostname, os, kernel, cpu_model, cpu_count, memory_total_bytes,
    memory_available_bytes, driver_version, driver_source, proc_driver_present, libcuda_loaded,
    libcuda_error, cuda_driver_version, cuda_compile_version, cuda_runtime_version, cudart_library,
    nccl_compile_version, nccl_runtime_version, nccl_library, cudnn_version, cudnn_library,
    torch_built_in, torch_version, torch_cuda, torch_source, torch_cuda_arch_list, gpus, gpu_source,
    gpu_error, gpu_processes_known, gpu_processes, shm_total_bytes, shm_available_bytes, memlock,
    nofile, rdma_devices, interfaces, env, python)

// "12.1" for 12010; "" for 0.
std::string FormatCudaVersion(int version);
// "2.28.9" for 22809 (and 2.8.4 for the pre-2.9 code 2804); "" for 0.
std::string FormatNcclVersion(int code);
// "9.1.0" for 90100, "8.9.7" for 8907; "" for 0.
std::string FormatCudnnVersion(int version);
// "12.1" -> 12010, "13.0" -> 13000; 0 when not of that form.
int ParseCudaVersion(const std::string& text);

}  // namespace dlaunch::launcher
