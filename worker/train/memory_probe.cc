#include "worker/train/memory_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>

#include "core/base/proc.h"

#ifdef DLAUNCH_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace dlaunch::worker {

rundir::MemoryFigures ReadMemory(int cuda_device) {
  rundir::MemoryFigures m;
  // statm's second field is the resident set in pages: one read, no parsing of field names.
  int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[128];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n > 0) {
      buf[n] = '\0';
      char* p = buf;
      std::strtoll(p, &p, 10);
      m.rss_bytes = std::strtoll(p, nullptr, 10) * ::sysconf(_SC_PAGESIZE);
    }
  }
  // The high-water mark (VmHWM) lags the page counters a little; a peak is never below now.
  m.peak_rss_bytes = std::max(base::PeakRssBytes(), m.rss_bytes);
#ifdef DLAUNCH_TORCH_CUDA
  if (cuda_device >= 0) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(cuda_device);
    using c10::cuda::CUDACachingAllocator::StatType;
    const auto agg = static_cast<size_t>(StatType::AGGREGATE);
    m.device_allocated_bytes = stats.allocated_bytes[agg].current;
    m.device_reserved_bytes = stats.reserved_bytes[agg].current;
    m.device_peak_bytes = stats.allocated_bytes[agg].peak;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      m.device_free_bytes = static_cast<int64_t>(free_b);
      m.device_total_bytes = static_cast<int64_t>(total_b);
    }
  }
#else
  (void)cuda_device;
#endif
  return m;
}

int64_t TriedToAllocate(const std::string& message) {
  std::smatch m;
  static const std::regex cpu("tried to allocate ([0-9]+) bytes");
  static const std::regex cuda("Tried to allocate ([0-9.]+) (bytes|KiB|MiB|GiB|TiB)");
  if (std::regex_search(message, m, cpu)) return std::stoll(m[1]);
  if (std::regex_search(message, m, cuda)) {
    double v = std::stod(m[1]);
    const std::string unit = m[2];
    double scale = unit == "KiB"   ? 1024.0
                   : unit == "MiB" ? 1048576.0
                   : unit == "GiB" ? 1073741824.0
                   : unit == "TiB" ? 1099511627776.0
                                   : 1.0;
    return static_cast<int64_t>(v * scale);
  }
  return -1;
}

bool LooksLikeAllocationFailure(const std::string& message) {
  return message.find("can't allocate memory") != std::string::npos ||
         message.find("out of memory") != std::string::npos ||
         message.find("Cannot allocate memory") != std::string::npos;
}

int64_t MemTotalBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = -1;
  if (in >> key >> kb && key == "MemTotal:") return kb * 1024;
  return -1;
}

}  // namespace dlaunch::worker
