#include "launcher/job/cluster_env.h"

#include <algorithm>
#include <iostream>

#include "core/error.h"
#include "launcher/cluster/env_values.h"
#include "launcher/launch_checks.h"

namespace dlaunch::launcher {

PlacementRequest PlacementRequestFor(const LaunchOptions& o, NodeShare share, const EnvMap& env) {
  PlacementRequest req;
  req.gpu_binding = o.gpu_binding;
  req.numa_binding = o.numa_binding;
  req.virtual_local_rank = o.virtual_local_rank;
  req.nproc = o.nproc;
  req.share_index = share.index;
  req.share_count = share.count;
  if (auto it = env.find("CUDA_VISIBLE_DEVICES"); it != env.end())
    req.cuda_visible_devices = it->second;
  for (const auto& [k, v] : o.env)
    if (k == "CUDA_VISIBLE_DEVICES") req.cuda_visible_devices = v;
  return req;
}

std::vector<RankPlacement> PlaceRanks(const LaunchOptions& o, NodeShare share, const EnvMap& env) {
  auto placement = PlanPlacement(PlacementRequestFor(o, share, env), ReadTopology());
  if (std::any_of(placement.begin(), placement.end(), [](const RankPlacement& p) {
        return p.cuda_visible_devices || !p.cpus.empty();
      })) {
    std::cerr << "dlaunch: placement: " << FormatPlacement(placement) << std::endl;
  }
  return placement;
}

const std::vector<PetOption>& PetOptions() {
  // torchrun reads each option's default from PET_<DEST>; these are the ones dlaunch has.
  static const std::vector<PetOption> kOptions = {
      {"PET_NPROC_PER_NODE", {"nproc-per-node", "nproc_per_node", "nproc"}},
      {"PET_NNODES", {"nnodes"}},
      {"PET_NODE_RANK", {"node-rank", "node_rank"}},
      {"PET_RDZV_BACKEND", {"rdzv-backend", "rdzv_backend"}},
      {"PET_RDZV_ENDPOINT", {"rdzv-endpoint", "rdzv_endpoint"}},
      {"PET_RDZV_ID", {"rdzv-id", "rdzv_id", "run-id"}},
      {"PET_RDZV_CONF", {"rdzv-conf", "rdzv_conf"}},
      {"PET_STANDALONE", {"standalone"}, true},
      {"PET_MAX_RESTARTS", {"max-restarts", "max_restarts"}},
      {"PET_MONITOR_INTERVAL", {"monitor-interval", "monitor_interval"}},
      {"PET_LOG_DIR", {"log-dir", "log_dir"}},
      {"PET_REDIRECTS", {"redirects"}},
      {"PET_TEE", {"tee"}},
      {"PET_LOCAL_RANKS_FILTER", {"local-ranks-filter", "local_ranks_filter", "ranks-filter"}},
      {"PET_NO_PYTHON", {"no-python", "no_python"}, true},
      {"PET_MODULE", {"module"}, true},
      {"PET_RUN_PATH", {"run-path", "run_path"}, true},
      {"PET_NUMA_BINDING", {"numa-binding", "numa_binding"}},
      {"PET_ROLE", {"role"}},
      {"PET_START_METHOD", {"start-method", "start_method"}},
      {"PET_EVENT_LOG_HANDLER", {"event-log-handler", "event_log_handler"}},
      {"PET_LOG_LINE_PREFIX_TEMPLATE", {"log-line-prefix-template", "log_line_prefix_template"}},
      {"PET_DUPLICATE_STDOUT_FILTERS", {"duplicate-stdout-filters", "duplicate_stdout_filters"}},
      {"PET_DUPLICATE_STDERR_FILTERS", {"duplicate-stderr-filters", "duplicate_stderr_filters"}},
      {"PET_LOCAL_ADDR", {"local-addr", "local_addr"}},
      {"PET_SIGNALS_TO_HANDLE", {"signals-to-handle", "signals_to_handle"}},
      {"PET_SHUTDOWN_TIMEOUT", {"shutdown-timeout", "shutdown_timeout", "grace-period"}},
      {"PET_VIRTUAL_LOCAL_RANK", {"virtual-local-rank", "virtual_local_rank"}, true},
  };
  return kOptions;
}

std::vector<std::pair<std::string, std::string>> KubeflowArgs(
    const EnvMap& env, const std::function<bool(const std::string&)>& given) {
  auto set = [&](const std::vector<std::string>& names) {
    return std::any_of(names.begin(), names.end(), given);
  };
  std::vector<std::pair<std::string, std::string>> args;
  for (const PetOption& p : PetOptions()) {
    const auto it = env.find(p.variable);
    if (it == env.end() || set(p.option)) continue;
    // torchrun takes a set variable's value, "" included, and then fails on it (int(""), a
    // switch's int("")): an empty one is a mistake, not "unset".
    if (it->second.empty()) {
      throw UsageError(std::string(p.variable) + " is set but empty: give it a value, or unset it");
    }
    const std::string* value = &it->second;
    if (!p.is_switch) {
      args.emplace_back(p.variable, "--" + p.option.front() + "=" + *value);
    } else if (*value == "1") {
      args.emplace_back(p.variable, "--" + p.option.front());
    } else if (*value != "0") {
      throw UsageError(std::string(p.variable) + "='" + *value + "' must be 1 or 0");
    }
  }
  // A PyTorchJob sets MASTER_ADDR and MASTER_PORT too, older operators only those.
  const bool kubeflow = cluster::Find(env, "PET_NNODES") != nullptr;
  const std::string* addr = cluster::Find(env, "PET_MASTER_ADDR");
  const std::string* port = cluster::Find(env, "PET_MASTER_PORT");
  if (kubeflow && !addr) addr = cluster::Find(env, "MASTER_ADDR");
  if (kubeflow && !port) port = cluster::Find(env, "MASTER_PORT");
  if (addr && port && !cluster::Find(env, "PET_RDZV_ENDPOINT") &&
      !set({"rdzv-endpoint", "rdzv_endpoint"})) {
    args.emplace_back("PET_MASTER_ADDR/PET_MASTER_PORT",
                      "--rdzv-endpoint=" + JoinEndpoint(*addr, *port));
  }
  return args;
}

}  // namespace dlaunch::launcher
