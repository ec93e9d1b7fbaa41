// A stand-in libcuda.so.1 for GPU-less machines, paired with the fake NVML: reports the driver's
// CUDA version from FAKE_CUDA_DRIVER_VERSION (default 12040) and has no device to initialise.
#include <cstdlib>

extern "C" {

int cuDriverGetVersion(int* version) {
  const char* v = std::getenv("FAKE_CUDA_DRIVER_VERSION");
  *version = v != nullptr ? std::atoi(v) : 12040;
  return 0;
}

int cuInit(unsigned int flags) { return 100; }  // CUDA_ERROR_NO_DEVICE

int cuGetErrorString(int error, const char** text) {
  *text = "no CUDA-capable device is detected";
  return 0;
}

}  // extern "C"
