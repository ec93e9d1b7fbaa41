#include "launcher/doctor/verdict.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "launcher/doctor/cuda_compat.h"
#include "launcher/doctor/nccl_ifname_filter.h"
#include "launcher/doctor/system_parsers.h"
#include "launcher/doctor/verdict_rules.h"

namespace dlaunch::launcher {
namespace {

std::string Env(const DoctorFacts& f, const std::string& name, bool* set = nullptr) {
  auto it = f.env.find(name);
  if (set != nullptr) *set = it != f.env.end();
  return it == f.env.end() ? "" : it->second;
}

std::string Join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::string Sm(int cc) { return "sm_" + std::to_string(cc); }
int Cc(const GpuFacts& gpu) { return gpu.cc_major * 10 + gpu.cc_minor; }
std::string CcText(int cc) { return std::to_string(cc / 10) + "." + std::to_string(cc % 10); }

std::string InterfaceList(const std::vector<NetInterfaceFacts>& nics) {
  std::vector<std::string> parts;
  for (const NetInterfaceFacts& nic : nics) {
    std::string p = nic.name;
    if (!nic.ipv4.empty()) {
      p += " " + nic.ipv4.front();
    } else if (!nic.ipv6.empty()) {
      p += " " + nic.ipv6.front();
    } else {
      p += " (no address)";
    }
    parts.push_back(p);
  }
  return parts.empty() ? "none" : Join(parts, ", ");
}

// The interface a user most likely means: the first up, non-loopback one with IPv4.
std::string SuggestedInterface(const std::vector<NetInterfaceFacts>& nics) {
  for (const NetInterfaceFacts& nic : nics) {
    if (nic.up && !nic.loopback && !nic.ipv4.empty()) return nic.name;
  }
  for (const NetInterfaceFacts& nic : nics) {
    if (!nic.loopback && (!nic.ipv4.empty() || !nic.ipv6.empty())) return nic.name;
  }
  return "lo";
}

CheckResult CheckDriver(const DoctorFacts& f) {
  CheckResult c = Make("nvidia_driver", "NVIDIA driver");
  if (!HaveDriver(f) && !f.proc_driver_present && f.gpus.empty()) {
    std::string why = "no NVIDIA driver or GPU on this machine (no /proc/driver/nvidia/version";
    if (!f.libcuda_error.empty()) why += "; " + f.libcuda_error;
    Skip(&c, why + "): GPU checks skipped, CPU training with Gloo still works");
    return c;
  }
  if ((f.proc_driver_present || HaveDriver(f)) && !f.libcuda_error.empty()) {
    Fail(&c,
         "NVIDIA driver " + (HaveDriver(f) ? f.driver_version : std::string("?")) +
             " is installed, but " + f.libcuda_error,
         "in a container, start it with the NVIDIA runtime (docker run --gpus all, "
         "nvidia-container-toolkit); on a host, reinstall the driver's user-space libraries "
         "(libcuda.so.1) of the same version as the kernel module",
         true);
    return c;
  }
  std::string detail = "driver " + (HaveDriver(f) ? f.driver_version : std::string("?"));
  if (DriverCuda(f) > 0) detail += ", supports CUDA up to " + FormatCudaVersion(DriverCuda(f));
  detail += ", " + std::to_string(f.gpus.size()) + " GPU" + (f.gpus.size() == 1 ? "" : "s");
  Pass(&c, detail);
  return c;
}

CheckResult CheckDriverVsRuntime(const DoctorFacts& f) {
  CheckResult c = Make("driver_cuda_runtime", "Driver new enough for dlaunch's CUDA runtime");
  int runtime = f.cuda_runtime_version > 0 ? f.cuda_runtime_version : f.cuda_compile_version;
  if (runtime == 0) {
    Skip(&c, "dlaunch was built without CUDA and no libcudart was found");
    return c;
  }
  if (!HaveDriver(f)) {
    Skip(&c, "CUDA runtime " + FormatCudaVersion(runtime) + ", but no NVIDIA driver to run it");
    return c;
  }
  if (f.cuda_runtime_version == 0 && !f.gpus.empty()) {
    // The NCCL backend links libcudart: without it dlaunch-worker does not even start.
    std::string soname = "libcudart.so." + std::to_string(runtime / 1000);
    Fail(&c,
         "dlaunch was built against CUDA " + FormatCudaVersion(runtime) + " but " + soname +
             " cannot be loaded",
         "install the CUDA " + FormatCudaVersion(runtime) + " runtime or add the folder holding " +
             soname + " to LD_LIBRARY_PATH",
         true);
    return c;
  }
  std::string minimum = MinimumDriverForCuda(runtime);
  int driver_cuda = DriverCuda(f);
  bool table_says_old = !minimum.empty() && CompareDriverVersions(f.driver_version, minimum) < 0;
  bool driver_says_old = f.cuda_driver_version > 0 && f.cuda_driver_version < runtime;
  if (table_says_old || driver_says_old) {
    std::string detail = "driver " + f.driver_version + " supports CUDA up to " +
                         FormatCudaVersion(driver_cuda) + ", but dlaunch's CUDA runtime is " +
                         FormatCudaVersion(runtime);
    if (!minimum.empty()) detail += " (NVIDIA's minimum driver for it: " + minimum + ")";
    std::string fix =
        "upgrade the NVIDIA driver to " +
        (minimum.empty() ? "one supporting CUDA " + FormatCudaVersion(runtime) : ">= " + minimum) +
        ", or run a dlaunch built against CUDA <= " + FormatCudaVersion(driver_cuda);
    Fail(&c, detail, fix, true);
    return c;
  }
  Pass(&c, "CUDA runtime " + FormatCudaVersion(runtime) + " on driver " + f.driver_version +
               (minimum.empty() ? "" : " (needs >= " + minimum + ")"));
  return c;
}

struct Arch {
  int cc = 0;
  bool ptx = false;
};

// "8.6", "9.0+PTX", "sm_86", "compute_90", "86".
bool ParseArch(const std::string& text, Arch* arch) {
  std::string t = text;
  arch->ptx = false;
  size_t plus = t.find("+PTX");
  if (plus != std::string::npos) {
    arch->ptx = true;
    t.resize(plus);
  }
  if (t.rfind("compute_", 0) == 0) {
    arch->ptx = true;
    t = t.substr(8);
  } else if (t.rfind("sm_", 0) == 0) {
    t = t.substr(3);
  }
  while (!t.empty() && std::isalpha(static_cast<unsigned char>(t.back()))) t.pop_back();  // 9.0a
  int major = 0, minor = 0;
  size_t dot = t.find('.');
  try {
    if (dot != std::string::npos) {
      major = std::stoi(t.substr(0, dot));
      minor = std::stoi(t.substr(dot + 1));
    } else {
      int v = std::stoi(t);
      major = v / 10;
      minor = v % 10;
    }
  } catch (...) {
    return false;
  }
  arch->cc = major * 10 + minor;
  return major > 0;
}

// Whether a build for these arches has code that runs on `cc`: a cubin runs on GPUs of the same
// major with an equal or higher minor; PTX is compiled by the driver for any equal or newer GPU.
bool ArchListCovers(const std::vector<std::string>& list, int cc) {
  for (const std::string& item : list) {
    Arch a;
    if (!ParseArch(item, &a)) continue;
    if (a.cc / 10 == cc / 10 && a.cc <= cc) return true;
    if (a.ptx && a.cc <= cc) return true;
  }
  return false;
}

CheckResult CheckComputeCapability(const DoctorFacts& f) {
  CheckResult c = Make("compute_capability", "GPU compute capability covered by the build");
  if (f.gpus.empty()) {
    Skip(&c, "no GPU");
    return c;
  }
  std::vector<std::string> problems, fixes;
  int runtime = f.cuda_compile_version > 0 ? f.cuda_compile_version : f.cuda_runtime_version;
  int min_cc = 0, max_cc = 0;
  bool runtime_range = ComputeCapabilityRange(runtime, &min_cc, &max_cc);
  int torch_cuda = ParseCudaVersion(f.torch_cuda);
  int tmin = 0, tmax = 0;
  bool torch_range =
      f.torch_built_in && torch_cuda > 0 && ComputeCapabilityRange(torch_cuda, &tmin, &tmax);
  std::set<int> seen;
  for (const GpuFacts& gpu : f.gpus) {
    int cc = Cc(gpu);
    if (cc == 0 || !seen.insert(cc).second) continue;
    std::string who = gpu.name + " (" + Sm(cc) + ")";
    // NCCL and dlaunch's CUDA code come from this toolkit; it cannot target GPUs below its floor.
    if (runtime_range && cc < min_cc) {
      problems.push_back(who + " is older than CUDA " + FormatCudaVersion(runtime) +
                         " supports (compute capability " + CcText(min_cc) + " and newer)");
      fixes.push_back("build dlaunch against an older CUDA toolkit that still targets " + Sm(cc) +
                      " (CUDA 12.x reaches down to 5.0)");
    }
    if (!f.torch_built_in || f.torch_cuda.empty()) continue;
    if (!f.torch_cuda_arch_list.empty()) {
      if (!ArchListCovers(f.torch_cuda_arch_list, cc)) {
        problems.push_back("libtorch has no kernels for " + who + ": built for " +
                           Join(f.torch_cuda_arch_list, ";"));
        fixes.push_back("use a libtorch whose arch list includes " + CcText(cc));
      }
    } else if (torch_range && (cc < tmin || cc > tmax)) {
      problems.push_back("libtorch for CUDA " + f.torch_cuda + " cannot have kernels for " + who +
                         " (CUDA " + f.torch_cuda + " targets " + CcText(tmin) + " to " +
                         CcText(tmax) + ")");
      fixes.push_back(cc > tmax ? "use a libtorch built for a newer CUDA that targets " + Sm(cc)
                                : "use a libtorch built for an older CUDA that targets " + Sm(cc));
    }
  }
  if (!problems.empty()) {
    Fail(&c, Join(problems, "; "), Join(fixes, "; "), true);
    return c;
  }
  std::vector<std::string> ccs;
  for (int cc : seen) ccs.push_back(Sm(cc));
  Pass(&c, ccs.empty() ? "compute capability unknown" : Join(ccs, ", ") + " covered");
  return c;
}

CheckResult CheckNccl(const DoctorFacts& f) {
  CheckResult c = Make("nccl_version", "NCCL run time at least the compile-time version");
  std::string compile = FormatNcclVersion(f.nccl_compile_version);
  std::string runtime = FormatNcclVersion(f.nccl_runtime_version);
  if (f.nccl_compile_version == 0) {
    if (f.nccl_runtime_version > 0) {
      Pass(&c, "NCCL " + runtime + " found; dlaunch was built without the NCCL backend");
    } else {
      Skip(&c, "dlaunch was built without the NCCL backend");
    }
    return c;
  }
  if (f.nccl_runtime_version == 0) {
    std::string detail =
        "dlaunch was compiled against NCCL " + compile + " but libnccl.so.2 cannot be loaded";
    std::string fix =
        "install NCCL >= " + compile + " (libnccl2) or add its folder to LD_LIBRARY_PATH";
    if (f.gpus.empty()) {
      Warn(&c, detail + " (no GPU here, so only GPU jobs would fail)", fix);
    } else {
      Fail(&c, detail, fix, true);
    }
    return c;
  }
  if (f.nccl_runtime_version < f.nccl_compile_version) {
    Fail(&c,
         "libnccl.so.2 " + (f.nccl_library.empty() ? "" : "at " + f.nccl_library + " ") + "is " +
             runtime + ", older than NCCL " + compile + " that dlaunch was compiled against",
         "put NCCL >= " + compile +
             " first on LD_LIBRARY_PATH (or upgrade libnccl2), or rebuild dlaunch against NCCL " +
             runtime,
         true);
    return c;
  }
  Pass(&c, "run time " + runtime + ", compiled against " + compile);
  return c;
}

CheckResult CheckShm(const DoctorFacts& f) {
  CheckResult c = Make("dev_shm", "/dev/shm large enough for NCCL");
  bool gpus = !f.gpus.empty();
  std::string fix =
      "containers: docker run --shm-size=1g (or --ipc=host); Kubernetes: mount an emptyDir with "
      "medium: Memory at /dev/shm; hosts: mount -o remount,size=8G /dev/shm";
  if (f.shm_total_bytes < 0) {
    Fail(&c, "/dev/shm is not mounted; NCCL's shared-memory transport needs it", fix, gpus);
    return c;
  }
  uint64_t total = static_cast<uint64_t>(f.shm_total_bytes);
  if (total < Verdict::kMinShmBytes) {
    Fail(&c,
         "/dev/shm is " + FormatByteCount(total) +
             "; NCCL's shared-memory transport and DataLoader workers need more (at least " +
             FormatByteCount(Verdict::kMinShmBytes) +
             ", the size NVIDIA's container guidance uses)",
         fix, gpus);
    return c;
  }
  uint64_t available = f.shm_available_bytes < 0 ? 0 : f.shm_available_bytes;
  if (available < Verdict::kMinShmBytes / 4) {
    Warn(&c,
         "/dev/shm is " + FormatByteCount(total) + " but only " + FormatByteCount(available) +
             " is free",
         "look for stale files of earlier runs: ls -la /dev/shm (NCCL's are nccl-*)");
    return c;
  }
  Pass(&c, FormatByteCount(total) + " (" + FormatByteCount(available) + " free)");
  return c;
}

CheckResult CheckMemlock(const DoctorFacts& f) {
  CheckResult c = Make("memlock", "Locked-memory limit (ulimit -l)");
  if (!f.memlock.known) {
    Skip(&c, "limit not read");
    return c;
  }
  if (f.memlock.unlimited) {
    Pass(&c, "unlimited");
    return c;
  }
  std::string fix =
      "containers: docker run --ulimit memlock=-1; hosts: 'memlock unlimited' in "
      "/etc/security/limits.conf (LimitMEMLOCK=infinity for services such as slurmd)";
  std::string value = FormatByteCount(f.memlock.soft);
  bool ib_disabled = Env(f, "NCCL_IB_DISABLE") == "1";
  if (!f.rdma_devices.empty() && !ib_disabled) {
    Fail(&c,
         "memlock is " + value + " with RDMA devices " + Join(f.rdma_devices, ", ") +
             "; NCCL's InfiniBand/RoCE transport pins its buffers and fails to register them "
             "under a limited memlock",
         fix, !f.gpus.empty());
    return c;
  }
  if (f.memlock.soft < Verdict::kMinMemlockBytes) {
    Warn(&c, "memlock is " + value + ": fine for NCCL over sockets, too small for InfiniBand/RoCE",
         fix);
    return c;
  }
  Pass(&c, value);
  return c;
}

CheckResult CheckNofile(const DoctorFacts& f) {
  CheckResult c = Make("nofile", "Open-file limit (ulimit -n)");
  if (!f.nofile.known) {
    Skip(&c, "limit not read");
    return c;
  }
  if (!f.nofile.unlimited && f.nofile.soft < Verdict::kMinOpenFiles) {
    Warn(&c,
         "only " + std::to_string(f.nofile.soft) +
             " open files; NCCL sockets, logs and DataLoader workers add up on many-GPU nodes",
         "ulimit -n 65536 (the hard limit is " +
             (f.nofile.hard_unlimited ? std::string("unlimited") : std::to_string(f.nofile.hard)) +
             ")");
    return c;
  }
  Pass(&c, f.nofile.unlimited ? "unlimited" : std::to_string(f.nofile.soft));
  return c;
}

CheckResult CheckNcclIfname(const DoctorFacts& f) {
  CheckResult c = Make("nccl_socket_ifname", "NCCL_SOCKET_IFNAME names an interface");
  bool set = false;
  std::string spec = Env(f, "NCCL_SOCKET_IFNAME", &set);
  if (!set) {
    Pass(&c, "unset: NCCL picks an interface itself (ib* first, then any but lo and docker*)");
    return c;
  }
  if (f.interfaces.empty()) {
    Skip(&c, "NCCL_SOCKET_IFNAME=" + spec + "; interfaces not read");
    return c;
  }
  NcclIfnameFilter filter = NcclIfnameFilter::Parse(spec);
  std::vector<std::string> usable = filter.Usable(f.interfaces);
  if (usable.empty()) {
    std::string suggestion = SuggestedInterface(f.interfaces);
    Fail(&c,
         "NCCL_SOCKET_IFNAME=" + spec + " matches no interface with an address (" +
             (filter.exclude() ? "excluding " : "") +
             (filter.exact() ? "exact names " : "prefixes ") + Join(filter.names(), ",") +
             "); interfaces here: " + InterfaceList(f.interfaces),
         "export NCCL_SOCKET_IFNAME=" + suggestion + " (or =" + suggestion +
             " for that name exactly), or unset it",
         !f.gpus.empty());  // NCCL runs only on GPU machines
    return c;
  }
  Pass(&c, "NCCL_SOCKET_IFNAME=" + spec + " selects " + Join(usable, ", "));
  return c;
}

CheckResult CheckGlooIfname(const DoctorFacts& f) {
  CheckResult c = Make("gloo_socket_ifname", "GLOO_SOCKET_IFNAME names an interface");
  bool set = false;
  std::string spec = Env(f, "GLOO_SOCKET_IFNAME", &set);
  if (!set) {
    Pass(&c, "unset: Gloo uses the address the hostname resolves to");
    return c;
  }
  if (f.interfaces.empty()) {
    Skip(&c, "GLOO_SOCKET_IFNAME=" + spec + "; interfaces not read");
    return c;
  }
  // Gloo takes exact interface names, comma separated.
  std::vector<std::string> missing;
  std::istringstream in(spec);
  std::string name;
  while (std::getline(in, name, ',')) {
    bool found = std::any_of(f.interfaces.begin(), f.interfaces.end(), [&](const auto& nic) {
      return nic.name == name && (!nic.ipv4.empty() || !nic.ipv6.empty());
    });
    if (!found) missing.push_back(name.empty() ? "\"\"" : name);
  }
  if (!missing.empty()) {
    Fail(&c,
         "GLOO_SOCKET_IFNAME=" + spec + ": no interface with an address named " +
             Join(missing, ", ") + "; interfaces here: " + InterfaceList(f.interfaces),
         "export GLOO_SOCKET_IFNAME=" + SuggestedInterface(f.interfaces) + ", or unset it", true);
    return c;
  }
  Pass(&c, "GLOO_SOCKET_IFNAME=" + spec);
  return c;
}

CheckResult CheckVisibleDevices(const DoctorFacts& f) {
  CheckResult c = Make("cuda_visible_devices", "CUDA_VISIBLE_DEVICES names existing GPUs");
  bool set = false;
  std::string spec = Env(f, "CUDA_VISIBLE_DEVICES", &set);
  if (f.gpus.empty()) {
    Skip(&c, set ? "CUDA_VISIBLE_DEVICES=" + spec + ", but no GPU to check it against" : "no GPU");
    return c;
  }
  if (set && f.gpu_source == "libcuda") {
    Skip(&c, "CUDA_VISIBLE_DEVICES=" + spec +
                 "; GPUs were listed through CUDA (no NVML), which already applies it");
    return c;
  }
  size_t n = f.gpus.size();
  std::string range = n == 1 ? "0" : "0-" + std::to_string(n - 1);
  std::string fix = "set CUDA_VISIBLE_DEVICES to indices in " + range +
                    " or to UUIDs that nvidia-smi -L prints, or unset it";
  if (!set) {
    Pass(&c, "unset: all " + std::to_string(n) + " GPUs visible");
    return c;
  }
  std::vector<std::string> tokens;
  std::istringstream in(spec);
  std::string token;
  while (std::getline(in, token, ',')) {
    token.erase(0, token.find_first_not_of(" \t"));
    token.erase(token.find_last_not_of(" \t") + 1);
    tokens.push_back(token);
  }
  if (tokens.empty() || (tokens.size() == 1 && (tokens[0].empty() || tokens[0] == "-1"))) {
    Fail(&c, "CUDA_VISIBLE_DEVICES=\"" + spec + "\" hides every GPU", fix, true);
    return c;
  }
  std::set<int> used;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    std::string problem;
    int index = -1;
    if (!t.empty() && std::all_of(t.begin(), t.end(), ::isdigit)) {
      index = std::stoi(t);
      if (index >= static_cast<int>(n)) {
        problem = "names GPU " + t + ", but this machine has " + std::to_string(n) + " GPU" +
                  (n == 1 ? "" : "s") + " (" + range + ")";
      }
    } else if (t.rfind("GPU-", 0) == 0) {
      for (const GpuFacts& gpu : f.gpus) {
        if (!gpu.uuid.empty() && gpu.uuid.rfind(t, 0) == 0) index = gpu.index;
      }
      if (index < 0) problem = "names " + t + ", which is no GPU's UUID here";
    } else if (t.rfind("MIG-", 0) == 0) {
      continue;  // MIG instances are not listed here; CUDA validates them
    } else {
      problem = "has \"" + t + "\", which is neither a GPU index nor a UUID";
    }
    if (problem.empty() && index >= 0 && !used.insert(index).second) {
      problem = "lists GPU " + std::to_string(index) + " twice";
    }
    if (!problem.empty()) {
      Fail(&c,
           "CUDA_VISIBLE_DEVICES=" + spec + " " + problem +
               "; CUDA ignores that entry and every "
               "one after it",
           fix, true);
      return c;
    }
  }
  Pass(&c, "CUDA_VISIBLE_DEVICES=" + spec);
  return c;
}

CheckResult CheckGpuProcesses(const DoctorFacts& f) {
  CheckResult c = Make("gpu_processes", "No processes holding GPU memory");
  if (f.gpus.empty()) {
    Skip(&c, "no GPU");
    return c;
  }
  if (!f.gpu_processes_known) {
    Skip(&c, "processes could not be listed");
    return c;
  }
  if (f.gpu_processes.empty()) {
    Pass(&c, "none");
    return c;
  }
  std::vector<std::string> parts;
  std::set<int64_t> pids;
  for (const GpuProcessFacts& p : f.gpu_processes) {
    parts.push_back("pid " + std::to_string(p.pid) +
                    (p.command.empty() ? "" : " (" + p.command + ")") + " holds " +
                    FormatByteCount(p.used_bytes) + " on GPU " + std::to_string(p.gpu_index));
    pids.insert(p.pid);
  }
  std::string kill = "kill";
  for (int64_t pid : pids) kill += " " + std::to_string(pid);
  Warn(&c, Join(parts, "; "),
       "if they are left over from an earlier run: " + kill +
           " (a pid without a name runs in another container)");
  return c;
}

}  // namespace

const char* CheckStatusName(CheckStatus status) {
  switch (status) {
    case CheckStatus::kPass:
      return "pass";
    case CheckStatus::kWarn:
      return "warn";
    case CheckStatus::kFail:
      return "fail";
    case CheckStatus::kSkip:
      return "skip";
  }
  return "skip";
}

const char* CheckStatusSymbol(CheckStatus status) {
  switch (status) {
    case CheckStatus::kPass:
      return "\u2713";
    case CheckStatus::kWarn:
      return "!";
    case CheckStatus::kFail:
      return "\u2717";
    case CheckStatus::kSkip:
      return "\u2013";
  }
  return "\u2013";
}

std::vector<CheckResult> Verdict::Judge(const DoctorFacts& facts) {
  std::vector<CheckResult> checks = {CheckDriver(facts), CheckDriverVsRuntime(facts),
                                     CheckTorchCuda(facts)};
  // The ranks' Python only when it was probed (`dlaunch doctor`, not the quick checks).
  if (!facts.python.interpreter.empty()) {
    checks.push_back(CheckPythonTorch(facts));
    checks.push_back(CheckPythonTorchCuda(facts));
  }
  for (CheckResult c :
       {CheckComputeCapability(facts), CheckNccl(facts), CheckShm(facts), CheckMemlock(facts),
        CheckNofile(facts), CheckNcclIfname(facts), CheckGlooIfname(facts),
        CheckVisibleDevices(facts), CheckGpuProcesses(facts)}) {
    checks.push_back(std::move(c));
  }
  return checks;
}

bool Verdict::AnyFailed(const std::vector<CheckResult>& checks) {
  return std::any_of(checks.begin(), checks.end(),
                     [](const CheckResult& c) { return c.status == CheckStatus::kFail; });
}

const CheckResult* Verdict::Find(const std::vector<CheckResult>& checks, const std::string& id) {
  for (const CheckResult& c : checks) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

}  // namespace dlaunch::launcher
