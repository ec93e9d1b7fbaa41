// Where each rank of a node runs: which GPU it uses (CUDA_VISIBLE_DEVICES or LOCAL_RANK) and
// which CPUs it may run on (torchrun's --numa-binding modes). Decided once per node before any
// rank starts, from the machine's topology, so it is tested with made-up machines.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/supervision/process_spawner.h"

namespace dlaunch::launcher {

// The machine as the launcher sees it.
struct Topology {
  std::vector<int> allowed_cpus;              // the launcher's own affinity
  std::map<int, std::vector<int>> numa_cpus;  // NUMA node -> its CPUs
  std::map<int, int> cpu_socket;              // CPU -> physical package
  std::map<int, int> cpu_core;                // CPU -> core id within its package
  // CPU -> the lowest CPU sharing its last-level cache (its core complex); absent: unknown
  std::map<int, int> cpu_llc;
  std::vector<int> gpu_numa;  // per GPU in PCI bus order (nvidia-smi's): NUMA node, -1 unknown
};

// <sysfs>/devices/system/{node,cpu}, the NVIDIA devices in <sysfs>/bus/pci and
// sched_getaffinity. `sysfs` is another root only for tests of made-up machines.
Topology ReadTopology(const std::string& sysfs = "/sys");

// --gpu-binding: which GPUs a rank sees.
enum class GpuBinding {
  kLocalRank,  // this launcher's GPUs; the rank uses GPU LOCAL_RANK
  kIsolate,    // CUDA_VISIBLE_DEVICES is the rank's one GPU
  kNone,       // the environment as it is
};

// --numa-binding (torchrun's modes): the CPUs a rank may run on.
enum class NumaBinding {
  kNone,         // the launcher's own
  kNode,         // its GPU's NUMA node
  kSocket,       // its GPU's socket
  kExclusive,    // the node's cores split among its ranks
  kCoreComplex,  // a last-level cache's cores each
};

// The flags' spellings: "local-rank", "isolate", "none"; "none", "node", "socket", "exclusive",
// "core-complex".
const char* GpuBindingName(GpuBinding binding);
const char* NumaBindingName(NumaBinding binding);
// The binding spelt `name`; nullopt for any other name.
std::optional<GpuBinding> GpuBindingNamed(const std::string& name);
std::optional<NumaBinding> NumaBindingNamed(const std::string& name);

struct PlacementRequest {
  GpuBinding gpu_binding = GpuBinding::kLocalRank;
  NumaBinding numa_binding = NumaBinding::kNone;
  // torchrun's --virtual-local-rank: each rank's CUDA_VISIBLE_DEVICES is its one GPU, as isolate
  // (its local rank's index where the machine shows none, as torchrun)
  bool virtual_local_rank = false;
  int nproc = 1;
  // This launcher among the launchers on the machine (srun -n2 on one node, mpirun): each gets
  // its own share of the GPUs and, for exclusive, of the cores.
  int share_index = 0;
  int share_count = 1;
  std::optional<std::string> cuda_visible_devices;  // the ranks' inherited value, if set
};

struct RankPlacement {
  int gpu = -1;  // index into the machine's GPUs, -1 none or unknown (a UUID)
  std::optional<std::string> cuda_visible_devices;  // set for the rank when present
  std::vector<int> cpus;                            // empty: the launcher's affinity
  // OMP_NUM_THREADS unless the user set it: the rank's share of the physical cores it may run
  // on (its CPUs, or the launcher's split among the ranks that share them), at least 1.
  int threads = 1;
};

// One entry per local rank. Throws UsageError for a binding the machine cannot give (isolate
// or --virtual-local-rank with fewer GPUs than ranks, exclusive with fewer cores than ranks on a
// NUMA node).
std::vector<RankPlacement> PlanPlacement(const PlacementRequest& request, const Topology& machine);

// "local rank 0: CUDA_VISIBLE_DEVICES=0 CPUs 0-11; local rank 1: ..." for the console.
std::string FormatPlacement(const std::vector<RankPlacement>& placement);

// Sets the rank's CUDA_VISIBLE_DEVICES and OMP_NUM_THREADS (where none is set) in spec->env, and
// its CPUs.
void ApplyPlacement(const RankPlacement& placement, ProcessSpec* spec);

// "0-3,8" <-> {0,1,2,3,8}. ParseCpuList throws UsageError.
std::vector<int> ParseCpuList(const std::string& text);
std::string FormatCpuList(const std::vector<int>& cpus);

}  // namespace dlaunch::launcher
