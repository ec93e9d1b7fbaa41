#include "launcher/doctor/probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "core/base/proc.h"
#include "launcher/doctor/build_info.h"
#include "launcher/doctor/nvidia_libraries.h"
#include "launcher/doctor/python_probe.h"
#include "launcher/doctor/system_parsers.h"

extern char** environ;

namespace dlaunch::launcher {
namespace {

LimitFacts ReadLimit(int resource) {
  LimitFacts limit;
  struct rlimit rl;
  if (getrlimit(resource, &rl) != 0) return limit;
  limit.known = true;
  limit.unlimited = rl.rlim_cur == RLIM_INFINITY;
  limit.soft = limit.unlimited ? 0 : static_cast<uint64_t>(rl.rlim_cur);
  limit.hard_unlimited = rl.rlim_max == RLIM_INFINITY;
  limit.hard = limit.hard_unlimited ? 0 : static_cast<uint64_t>(rl.rlim_max);
  return limit;
}

bool IsDoctorEnvName(const std::string& name) {
  return name.rfind("NCCL_", 0) == 0 || name.rfind("TORCH_NCCL_", 0) == 0 ||
         name == "CUDA_VISIBLE_DEVICES" || name == "NVIDIA_VISIBLE_DEVICES" ||
         name == "GLOO_SOCKET_IFNAME" || name == "CUDA_DEVICE_ORDER";
}

}  // namespace

DoctorFacts Probe::Run() const {
  DoctorFacts facts;
  ProbeHost(&facts);

  std::string proc_version;
  if (ReadSmallTextFile(Path("/proc/driver/nvidia/version"), &proc_version)) {
    facts.proc_driver_present = true;
    facts.driver_version = ParseNvidiaDriverVersion(proc_version);
    if (!facts.driver_version.empty()) facts.driver_source = "/proc/driver/nvidia/version";
  }

  const BuildInfo& build = GetBuildInfo();
  facts.cuda_compile_version = build.cuda_compile_version;
  facts.nccl_compile_version = build.nccl_compile_version;
  facts.torch_built_in = build.torch_built_in;
  facts.torch_version = build.torch_version;
  facts.torch_cuda = build.torch_cuda;
  facts.torch_source = build.torch_source;
  facts.torch_cuda_arch_list = build.torch_cuda_arch_list;
  if (!options_.python_interpreter.empty()) {
    facts.python = ProbePython(options_.python_interpreter, options_.python_source);
  }

  if (options_.load_libraries) {
    NvidiaLibraries::Probe(build.library_paths, options_.list_gpu_processes, &facts);
  } else {
    facts.gpu_error = "NVIDIA libraries not probed";
  }
  ProbeLimits(&facts);
  if (options_.read_process_state) {
    ProbeInterfaces(&facts);
    ProbeEnvironment(&facts);
  }
  return facts;
}

void Probe::ProbeHost(DoctorFacts* facts) const {
  facts->hostname = base::Hostname();
  struct utsname uts;
  if (uname(&uts) == 0) facts->kernel = uts.release;
  std::string text;
  if (ReadSmallTextFile(Path("/etc/os-release"), &text)) facts->os = ParseOsRelease(text);
  if (ReadSmallTextFile(Path("/proc/cpuinfo"), &text)) {
    ParseCpuInfo(text, &facts->cpu_model, &facts->cpu_count);
  }
  if (facts->cpu_count == 0) facts->cpu_count = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (ReadSmallTextFile(Path("/proc/meminfo"), &text)) {
    ParseMemInfo(text, &facts->memory_total_bytes, &facts->memory_available_bytes);
  }
}

void Probe::ProbeLimits(DoctorFacts* facts) const {
  struct statvfs vfs;
  if (statvfs(Path("/dev/shm").c_str(), &vfs) == 0) {
    facts->shm_total_bytes = static_cast<int64_t>(vfs.f_blocks) * vfs.f_frsize;
    facts->shm_available_bytes = static_cast<int64_t>(vfs.f_bavail) * vfs.f_frsize;
  }
  if (options_.read_process_state) {
    facts->memlock = ReadLimit(RLIMIT_MEMLOCK);
    facts->nofile = ReadLimit(RLIMIT_NOFILE);
  }
  if (DIR* dir = opendir(Path("/sys/class/infiniband").c_str())) {
    while (struct dirent* entry = readdir(dir)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..") facts->rdma_devices.push_back(name);
    }
    closedir(dir);
    std::sort(facts->rdma_devices.begin(), facts->rdma_devices.end());
  }
}

void Probe::ProbeInterfaces(DoctorFacts* facts) {
  struct ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return;
  std::map<std::string, NetInterfaceFacts> by_name;
  std::vector<std::string> order;
  for (struct ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_name == nullptr) continue;
    std::string name = ifa->ifa_name;
    if (by_name.count(name) == 0) order.push_back(name);
    NetInterfaceFacts& nic = by_name[name];
    nic.name = name;
    nic.up = nic.up || (ifa->ifa_flags & IFF_UP) != 0;
    nic.loopback = nic.loopback || (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    if (ifa->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {0};
    if (ifa->ifa_addr->sa_family == AF_INET) {
      auto* sin = reinterpret_cast<struct sockaddr_in*>(ifa->ifa_addr);
      if (inet_ntop(AF_INET, &sin->sin_addr, text, sizeof(text))) nic.ipv4.push_back(text);
    } else if (ifa->ifa_addr->sa_family == AF_INET6) {
      auto* sin6 = reinterpret_cast<struct sockaddr_in6*>(ifa->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&sin6->sin6_addr)) continue;
      if (inet_ntop(AF_INET6, &sin6->sin6_addr, text, sizeof(text))) nic.ipv6.push_back(text);
    }
  }
  freeifaddrs(list);
  for (const std::string& name : order) facts->interfaces.push_back(by_name[name]);
}

void Probe::ProbeEnvironment(DoctorFacts* facts) {
  for (char** env = environ; env != nullptr && *env != nullptr; ++env) {
    std::string entry = *env;
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string name = entry.substr(0, eq);
    if (IsDoctorEnvName(name)) facts->env[name] = entry.substr(eq + 1);
  }
}

}  // namespace dlaunch::launcher
