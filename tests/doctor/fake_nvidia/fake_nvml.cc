// A stand-in libnvidia-ml.so.1 for GPU-less machines: answers the NVML calls the doctor makes
// with GPUs described by environment variables, so the probe's dlopen path, the process listing
// and the GPU verdicts run end to end without hardware. The C ABI matches NVML's.
//   FAKE_NVML_GPUS (count, default 2), FAKE_NVML_DRIVER ("550.54.15"),
//   FAKE_CUDA_DRIVER_VERSION (12040), FAKE_NVML_PROCESS_PID (a pid shown holding 1 GiB on GPU 0).
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct ProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

int Index(void* device) { return static_cast<int>(reinterpret_cast<long>(device)) - 1; }

}  // namespace

extern "C" {

int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }

int nvmlSystemGetDriverVersion(char* out, unsigned int length) {
  const char* v = std::getenv("FAKE_NVML_DRIVER");
  std::snprintf(out, length, "%s", v != nullptr ? v : "550.54.15");
  return 0;
}

int nvmlSystemGetCudaDriverVersion_v2(int* version) {
  *version = EnvInt("FAKE_CUDA_DRIVER_VERSION", 12040);
  return 0;
}

int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = static_cast<unsigned int>(EnvInt("FAKE_NVML_GPUS", 2));
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  *device = reinterpret_cast<void*>(static_cast<long>(index) + 1);
  return 0;
}

int nvmlDeviceGetName(void* device, char* out, unsigned int length) {
  std::snprintf(out, length, "NVIDIA H100 80GB HBM3");
  return 0;
}

int nvmlDeviceGetUUID(void* device, char* out, unsigned int length) {
  std::snprintf(out, length, "GPU-0000000%d-fake-4000-8000-000000000000", Index(device));
  return 0;
}

int nvmlDeviceGetCudaComputeCapability(void* device, int* major, int* minor) {
  *major = 9;
  *minor = 0;
  return 0;
}

int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  memory->total = 85520809984ULL;
  memory->used = 556138496ULL;
  memory->free = memory->total - memory->used;
  return 0;
}

int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count, ProcessInfo* infos) {
  int pid = EnvInt("FAKE_NVML_PROCESS_PID", 0);
  if (pid <= 0 || Index(device) != 0) {
    *count = 0;
    return 0;
  }
  if (*count < 1) {
    *count = 1;
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  std::memset(infos, 0, sizeof(ProcessInfo));
  infos[0].pid = static_cast<unsigned int>(pid);
  infos[0].used_gpu_memory = 1ULL << 30;
  *count = 1;
  return 0;
}

}  // extern "C"
