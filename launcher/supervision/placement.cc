#include "launcher/supervision/placement.h"

#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "core/error.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

std::string ReadLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

int ReadInt(const fs::path& path, int fallback) {
  try {
    return std::stoi(ReadLine(path));
  } catch (const std::exception&) {
    return fallback;
  }
}

std::string Join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ",") + i;
  return s;
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) items.push_back(item);
  return items;
}

// The GPUs this launcher's ranks may use, as CUDA_VISIBLE_DEVICES entries: all it sees, or its
// part of them when several launchers share the machine and there are enough for every rank.
std::vector<std::string> AgentGpus(const std::vector<std::string>& visible, int nproc, int index,
                                   int count) {
  if (count <= 1 || static_cast<int>(visible.size()) < nproc * count) return visible;
  return {visible.begin() + index * nproc, visible.begin() + (index + 1) * nproc};
}

int GpuIndex(const std::string& entry, size_t gpus) {
  try {
    size_t used = 0;
    int i = std::stoi(entry, &used);
    if (used == entry.size() && i >= 0 && static_cast<size_t>(i) < gpus) return i;
  } catch (const std::exception&) {
  }
  return -1;  // a UUID or MIG name: no NUMA node known
}

// The NUMA node of each of the machine's rank slots (every launcher's ranks on this machine):
// its GPU's node, else the NUMA nodes in turn.
std::vector<int> SlotNuma(const PlacementRequest& req, const Topology& m,
                          const std::vector<std::string>& visible) {
  std::vector<int> nodes;
  for (const auto& [node, cpus] : m.numa_cpus) {
    if (std::any_of(cpus.begin(), cpus.end(), [&](int c) {
          return std::find(m.allowed_cpus.begin(), m.allowed_cpus.end(), c) != m.allowed_cpus.end();
        })) {
      nodes.push_back(node);
    }
  }
  std::vector<int> slot_numa;
  for (int a = 0; a < req.share_count; ++a) {
    const auto gpus = AgentGpus(visible, req.nproc, a, req.share_count);
    for (int r = 0; r < req.nproc; ++r) {
      const int slot = a * req.nproc + r;
      int numa = -1;
      if (!gpus.empty()) {
        const int g = GpuIndex(gpus[r % gpus.size()], m.gpu_numa.size());
        if (g >= 0) numa = m.gpu_numa[g];
      }
      if (numa < 0 && !nodes.empty()) numa = nodes[slot % nodes.size()];
      slot_numa.push_back(numa);
    }
  }
  return slot_numa;
}

std::vector<int> Allowed(const Topology& m, const std::vector<int>& cpus) {
  std::vector<int> out;
  for (int c : cpus) {
    if (std::find(m.allowed_cpus.begin(), m.allowed_cpus.end(), c) != m.allowed_cpus.end()) {
      out.push_back(c);
    }
  }
  return out;
}

std::vector<int> NodeCpus(const Topology& m, int numa) {
  auto it = m.numa_cpus.find(numa);
  std::vector<int> cpus = it == m.numa_cpus.end() ? m.allowed_cpus : Allowed(m, it->second);
  return cpus.empty() ? m.allowed_cpus : cpus;
}

std::vector<int> SocketCpus(const Topology& m, int numa) {
  std::set<int> sockets;
  for (int c : NodeCpus(m, numa)) {
    auto it = m.cpu_socket.find(c);
    sockets.insert(it == m.cpu_socket.end() ? 0 : it->second);
  }
  std::vector<int> cpus;
  for (int c : m.allowed_cpus) {
    auto it = m.cpu_socket.find(c);
    if (sockets.count(it == m.cpu_socket.end() ? 0 : it->second)) cpus.push_back(c);
  }
  return cpus;
}

// (socket, core) -> its CPUs: the physical cores among `cpus`, each with its hyperthreads.
std::map<std::pair<int, int>, std::vector<int>> PhysicalCores(const Topology& m,
                                                              const std::vector<int>& cpus) {
  std::map<std::pair<int, int>, std::vector<int>> cores;
  for (int c : cpus) {
    auto s = m.cpu_socket.find(c);
    auto k = m.cpu_core.find(c);
    cores[{s == m.cpu_socket.end() ? 0 : s->second, k == m.cpu_core.end() ? c : k->second}]
        .push_back(c);
  }
  return cores;
}

// The share of the NUMA node's physical cores (with their hyperthreads) that slot `slot` gets
// when the node's slots split them evenly.
std::vector<int> ExclusiveCpus(const Topology& m, const std::vector<int>& slot_numa, int slot) {
  const int numa = slot_numa[slot];
  const auto cores = PhysicalCores(m, NodeCpus(m, numa));
  const int sharing = static_cast<int>(std::count(slot_numa.begin(), slot_numa.end(), numa));
  const int position =
      static_cast<int>(std::count(slot_numa.begin(), slot_numa.begin() + slot, numa));
  const int n = static_cast<int>(cores.size());
  if (n < sharing) {
    throw UsageError("--numa-binding exclusive needs a physical core per rank: " +
                     std::to_string(sharing) + " ranks share NUMA node " + std::to_string(numa) +
                     "'s " + std::to_string(n) + " usable core" + (n == 1 ? "" : "s"));
  }
  std::vector<int> cpus;
  auto it = cores.begin();
  std::advance(it, position * n / sharing);
  for (int i = position * n / sharing; i < (position + 1) * n / sharing; ++i, ++it) {
    cpus.insert(cpus.end(), it->second.begin(), it->second.end());
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

// torchrun's core-complex: the CPUs of one last-level cache (an AMD CCX) on the slot's NUMA
// node, the node's slots taking its caches in turn, those with the most CPUs first.
std::vector<int> CoreComplexCpus(const Topology& m, const std::vector<int>& slot_numa, int slot) {
  const int numa = slot_numa[slot];
  std::map<int, std::vector<int>> by_cache;  // unknown caches: one group, the node's CPUs
  for (int c : NodeCpus(m, numa)) {
    auto it = m.cpu_llc.find(c);
    by_cache[it == m.cpu_llc.end() ? -1 : it->second].push_back(c);
  }
  std::vector<std::vector<int>> groups;
  for (auto& cache : by_cache) groups.push_back(std::move(cache.second));
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.size() > b.size(); });
  const auto position = std::count(slot_numa.begin(), slot_numa.begin() + slot, numa);
  return groups[position % groups.size()];
}

// NAME=value in `env`: replaces NAME's entry in place (unless `keep_given` and it has a value),
// else adds one at the end.
void SetEnv(std::vector<std::string>* env, const std::string& name, const std::string& value,
            bool keep_given) {
  const std::string prefix = name + "=";
  auto it = std::find_if(env->begin(), env->end(),
                         [&](const std::string& e) { return e.rfind(prefix, 0) == 0; });
  if (it == env->end()) {
    env->push_back(prefix + value);
  } else if (!keep_given || it->size() == prefix.size()) {
    *it = prefix + value;
  }
}

}  // namespace

std::vector<int> ParseCpuList(const std::string& text) {
  std::vector<int> cpus;
  for (const std::string& part : SplitCommas(text)) {
    try {
      const size_t dash = part.find('-');
      size_t used = 0;
      const int lo = std::stoi(part.substr(0, dash), &used);
      const int hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
      if (lo < 0 || hi < lo) throw std::invalid_argument(part);
      for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    } catch (const std::exception&) {
      throw UsageError("malformed CPU list '" + text + "'");
    }
  }
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    parts.push_back(j == i ? std::to_string(cpus[i])
                           : std::to_string(cpus[i]) + "-" + std::to_string(cpus[j]));
    i = j + 1;
  }
  return Join(parts);
}

Topology ReadTopology(const std::string& sysfs) {
  const fs::path root(sysfs);
  Topology m;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) m.allowed_cpus.push_back(c);
  }
  std::error_code ec;
  for (auto it = fs::directory_iterator(root / "devices/system/node", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename();
    if (name.rfind("node", 0) != 0 || name.size() == 4) continue;
    try {
      m.numa_cpus[std::stoi(name.substr(4))] = ParseCpuList(ReadLine(it->path() / "cpulist"));
    } catch (const std::exception&) {
    }
  }
  for (int c : m.allowed_cpus) {
    const fs::path topo = root / "devices/system/cpu" / ("cpu" + std::to_string(c)) / "topology";
    m.cpu_socket[c] = ReadInt(topo / "physical_package_id", 0);
    m.cpu_core[c] = ReadInt(topo / "core_id", c);
    // The highest cache level is the last-level cache; the CPUs sharing it, its core complex.
    int level = 0;
    const fs::path caches = root / "devices/system/cpu" / ("cpu" + std::to_string(c)) / "cache";
    for (auto it = fs::directory_iterator(caches, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      const int l = ReadInt(it->path() / "level", 0);
      if (l <= level) continue;
      try {
        const auto shared = ParseCpuList(ReadLine(it->path() / "shared_cpu_list"));
        if (shared.empty()) continue;
        m.cpu_llc[c] = *std::min_element(shared.begin(), shared.end());
        level = l;
      } catch (const UsageError&) {
      }
    }
    ec.clear();
  }
  // NVIDIA display and 3D controllers in PCI bus order, nvidia-smi's numbering (and CUDA's
  // with CUDA_DEVICE_ORDER=PCI_BUS_ID); sysfs has them also where /proc/driver/nvidia is hidden.
  std::vector<fs::path> gpus;
  for (auto it = fs::directory_iterator(root / "bus/pci/devices", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (ReadLine(it->path() / "vendor") == "0x10de" &&
        ReadLine(it->path() / "class").rfind("0x03", 0) == 0) {
      gpus.push_back(it->path());
    }
  }
  std::sort(gpus.begin(), gpus.end());
  for (const fs::path& gpu : gpus) m.gpu_numa.push_back(ReadInt(gpu / "numa_node", -1));
  return m;
}

namespace {

constexpr std::pair<GpuBinding, const char*> kGpuBindings[] = {
    {GpuBinding::kLocalRank, "local-rank"},
    {GpuBinding::kIsolate, "isolate"},
    {GpuBinding::kNone, "none"},
};
constexpr std::pair<NumaBinding, const char*> kNumaBindings[] = {
    {NumaBinding::kNone, "none"},
    {NumaBinding::kNode, "node"},
    {NumaBinding::kSocket, "socket"},
    {NumaBinding::kExclusive, "exclusive"},
    {NumaBinding::kCoreComplex, "core-complex"},
};

template <typename E, size_t N>
const char* NameOf(const std::pair<E, const char*> (&names)[N], E value) {
  for (const auto& [v, name] : names) {
    if (v == value) return name;
  }
  return "?";
}

template <typename E, size_t N>
std::optional<E> Named(const std::pair<E, const char*> (&names)[N], const std::string& name) {
  for (const auto& [v, n] : names) {
    if (name == n) return v;
  }
  return std::nullopt;
}

}  // namespace

const char* GpuBindingName(GpuBinding binding) { return NameOf(kGpuBindings, binding); }
const char* NumaBindingName(NumaBinding binding) { return NameOf(kNumaBindings, binding); }
std::optional<GpuBinding> GpuBindingNamed(const std::string& name) {
  return Named(kGpuBindings, name);
}
std::optional<NumaBinding> NumaBindingNamed(const std::string& name) {
  return Named(kNumaBindings, name);
}

std::vector<RankPlacement> PlanPlacement(const PlacementRequest& req, const Topology& m) {
  std::vector<std::string> visible;
  if (req.cuda_visible_devices) {
    visible = SplitCommas(*req.cuda_visible_devices);
  } else {
    for (size_t g = 0; g < m.gpu_numa.size(); ++g) visible.push_back(std::to_string(g));
  }
  const auto mine = AgentGpus(visible, req.nproc, req.share_index, req.share_count);
  const bool isolate = req.gpu_binding == GpuBinding::kIsolate || req.virtual_local_rank;
  if (isolate && static_cast<int>(mine.size()) < req.nproc &&
      !(req.virtual_local_rank && mine.empty())) {
    throw UsageError(
        std::string(req.virtual_local_rank ? "--virtual-local-rank" : "--gpu-binding isolate") +
        " needs a GPU per rank: " + std::to_string(req.nproc) + " ranks, " +
        std::to_string(mine.size()) + " GPU" + (mine.size() == 1 ? "" : "s") +
        " for this launcher");
  }
  // A launcher someone already bound to part of the machine (mpirun's --bind-to, Slurm's
  // --cpu-bind) has its own CPUs: its ranks split those, not the machine's with the others.
  PlacementRequest cpu_req = req;
  size_t machine_cpus = 0;
  for (const auto& [node, cpus] : m.numa_cpus) machine_cpus += cpus.size();
  if (m.allowed_cpus.size() < machine_cpus) {
    cpu_req.share_index = 0;
    cpu_req.share_count = 1;
  }
  const std::vector<int> slot_numa =
      req.numa_binding == NumaBinding::kNone ? std::vector<int>{} : SlotNuma(cpu_req, m, visible);
  // The CPU set of every slot on the machine, where ranks of node, socket or core-complex binding
  // share one.
  std::vector<std::vector<int>> shared_sets;
  if (req.numa_binding != NumaBinding::kExclusive) {
    for (size_t slot = 0; slot < slot_numa.size(); ++slot) {
      const int numa = slot_numa[slot];
      shared_sets.push_back(req.numa_binding == NumaBinding::kNode ? NodeCpus(m, numa)
                            : req.numa_binding == NumaBinding::kSocket
                                ? SocketCpus(m, numa)
                                : CoreComplexCpus(m, slot_numa, slot));
    }
  }
  std::vector<RankPlacement> out(req.nproc);
  for (int r = 0; r < req.nproc; ++r) {
    RankPlacement& p = out[r];
    if (!mine.empty()) p.gpu = GpuIndex(mine[r % mine.size()], m.gpu_numa.size());
    if (isolate) {
      // --virtual-local-rank on a machine without GPUs: torchrun's index all the same.
      p.cuda_visible_devices = mine.empty() ? std::to_string(r) : mine[r];
    } else if (req.gpu_binding == GpuBinding::kLocalRank && mine != visible) {
      p.cuda_visible_devices = Join(mine);  // LOCAL_RANK indexes this launcher's part
    }
    // Unbound ranks share the launcher's CPUs with every rank of the launchers that share them.
    int sharing = req.nproc * cpu_req.share_count;
    if (req.numa_binding != NumaBinding::kNone) {
      const int slot = cpu_req.share_index * req.nproc + r;
      if (req.numa_binding == NumaBinding::kExclusive) {
        p.cpus = ExclusiveCpus(m, slot_numa, slot);
        sharing = 1;
      } else {
        p.cpus = shared_sets[slot];
        sharing = static_cast<int>(std::count(shared_sets.begin(), shared_sets.end(), p.cpus));
      }
    }
    const int cores =
        static_cast<int>(PhysicalCores(m, p.cpus.empty() ? m.allowed_cpus : p.cpus).size());
    p.threads = std::max(1, cores / sharing);
  }
  return out;
}

std::string FormatPlacement(const std::vector<RankPlacement>& placement) {
  std::vector<std::string> parts;
  for (size_t r = 0; r < placement.size(); ++r) {
    const RankPlacement& p = placement[r];
    std::string part = "local rank " + std::to_string(r) + ":";
    if (p.cuda_visible_devices) part += " CUDA_VISIBLE_DEVICES=" + *p.cuda_visible_devices;
    if (!p.cpus.empty()) part += " CPUs " + FormatCpuList(p.cpus);
    parts.push_back(part);
  }
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : "; ") + p;
  return s;
}

void ApplyPlacement(const RankPlacement& placement, ProcessSpec* spec) {
  spec->cpus = placement.cpus;
  // A value the user gave (inherited or --env) stays; an empty one counts as none.
  SetEnv(&spec->env, "OMP_NUM_THREADS", std::to_string(placement.threads), /*keep_given=*/true);
  if (placement.cuda_visible_devices) {
    SetEnv(&spec->env, "CUDA_VISIBLE_DEVICES", *placement.cuda_visible_devices,
           /*keep_given=*/false);
  }
}

}  // namespace dlaunch::launcher
