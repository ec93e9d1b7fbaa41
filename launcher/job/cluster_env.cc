#include "launcher/job/cluster_env.h"

#include <algorithm>
#include <iostream>

#include "core/error.h"
#include "launcher/cluster/env_values.h"
#include "launcher/job/node_env.h"
#include "launcher/launch_checks.h"

namespace dlaunch::launcher {
namespace {

using cluster::Find;
using cluster::ParseCount;

int IntVar(const EnvMap& env, const char* key) { return ParseCount(env.at(key), key); }

// A Slurm job or step id: a number, or a usage error naming the variable.
uint64_t IdVar(const EnvMap& env, const char* key) {
  const std::string& text = env.at(key);
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
    throw UsageError(std::string(key) + "='" + text + "' is not a Slurm id");
  }
  return std::stoull(text.substr(0, 19));
}

// SLURM_GPUS_PER_TASK may name a type: "a100:2".
int GpuCount(const std::string& text, const char* key) {
  const size_t colon = text.rfind(':');
  return ParseCount(colon == std::string::npos ? text : text.substr(colon + 1), key);
}

// The dlaunch tasks of this step on this node (SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID).
int StepTasksOnNode(const EnvMap& env) {
  const std::string* per_node = Find(env, "SLURM_STEP_TASKS_PER_NODE");
  if (!per_node || !Find(env, "SLURM_NODEID")) return 1;
  const auto counts = ExpandSlurmCounts(*per_node);
  const int node = IntVar(env, "SLURM_NODEID");
  if (node >= static_cast<int>(counts.size())) {
    throw UsageError("SLURM_NODEID=" + std::to_string(node) + " but SLURM_STEP_TASKS_PER_NODE='" +
                     *per_node + "' lists " + std::to_string(counts.size()) + " nodes");
  }
  return std::max(1, counts[node]);
}

// mpirun inside an allocation starts the launchers itself (or through an srun of its daemons):
// its variables, not Slurm's, say which node a launcher is.
bool UnderMpirun(const EnvMap& env) { return Find(env, "OMPI_COMM_WORLD_SIZE") != nullptr; }

bool InSlurmStep(const EnvMap& env) {
  return Find(env, "SLURM_STEP_ID") && Find(env, "SLURM_STEP_NUM_TASKS") &&
         Find(env, "SLURM_PROCID") && !UnderMpirun(env);
}

// slurm-<job>[.<step>]-<time>-<random>: a second dlaunch in the same batch script or step gets a
// run directory of its own. Node 0's is the job's: the other nodes learn it at the rendezvous.
std::string SlurmRunId(const std::string& job) { return "slurm-" + job + "-" + NewRunId(); }

}  // namespace

std::string ApplySlurmStepEnv(const EnvMap& env, LaunchOptions* o) {
  if (!InSlurmStep(env)) return "";
  const int tasks = IntVar(env, "SLURM_STEP_NUM_TASKS");
  const int procid = IntVar(env, "SLURM_PROCID");
  // One task (an `srun --pty bash` shell, say): a multi-node command line of the user's own.
  if (tasks == 1 && o->nnodes_given) return "";
  if (o->nnodes_given && o->nnodes != tasks) {
    throw UsageError("--nnodes " + std::to_string(o->nnodes) + " but this Slurm step runs " +
                     std::to_string(tasks) + " dlaunch task" + (tasks == 1 ? "" : "s") +
                     ", each one node of the job: drop --nnodes (or give " + std::to_string(tasks) +
                     "), or start one task per node (srun --ntasks-per-node=1)");
  }
  o->nnodes = tasks;
  o->node_rank = procid;
  if (o->rdzv_endpoint.empty()) {
    const std::string* nodes = Find(env, "SLURM_STEP_NODELIST");
    if (!nodes) nodes = Find(env, "SLURM_JOB_NODELIST");
    if (!nodes) throw UsageError("SLURM_STEP_NODELIST is not set: cannot find node 0 of the step");
    const std::string* port = Find(env, "DLAUNCH_RDZV_PORT");
    o->rdzv_endpoint = ExpandSlurmNodelist(*nodes).front() + ":" +
                       (port ? *port
                             : std::to_string(SlurmStepPort(IdVar(env, "SLURM_JOB_ID"),
                                                            IdVar(env, "SLURM_STEP_ID"))));
  }
  if (Find(env, "SLURM_JOB_ID")) {
    o->job_id = "Slurm step " + env.at("SLURM_JOB_ID") + "." + env.at("SLURM_STEP_ID");
  }
  if (o->run_id.empty() && Find(env, "SLURM_JOB_ID")) {
    o->run_id = SlurmRunId(env.at("SLURM_JOB_ID") + "." + env.at("SLURM_STEP_ID"));
  }
  return "slurm";
}

std::string ApplySlurmBatchEnv(const EnvMap& env, LaunchOptions* o) {
  if (!Find(env, "SLURM_JOB_ID") || InSlurmStep(env) || UnderMpirun(env) || o->nnodes_given) {
    return "";
  }
  const char* key = Find(env, "SLURM_NNODES") ? "SLURM_NNODES" : "SLURM_JOB_NUM_NODES";
  const int nodes = Find(env, key) ? IntVar(env, key) : 1;
  if (nodes > 1) {
    throw UsageError("this Slurm job has " + std::to_string(nodes) +
                     " nodes but dlaunch runs in its batch script, on one of them: start it "
                     "with `srun --ntasks-per-node=1 dlaunch ...` so every node runs one");
  }
  o->nnodes = 1;
  o->node_rank = 0;
  if (o->run_id.empty()) o->run_id = SlurmRunId(env.at("SLURM_JOB_ID"));
  return "slurm";
}

void ApplySlurmNprocDefault(const EnvMap& env, LaunchOptions* o) {
  if (o->nproc_given || !Find(env, "SLURM_JOB_ID")) return;
  int nproc = 0;
  if (const std::string* per_task = Find(env, "SLURM_GPUS_PER_TASK")) {
    nproc = GpuCount(*per_task, "SLURM_GPUS_PER_TASK");
  } else if (const std::string* on_node = Find(env, "SLURM_GPUS_ON_NODE")) {
    nproc = GpuCount(*on_node, "SLURM_GPUS_ON_NODE") / AgentShareOfNode(env).count;
  } else if (!InSlurmStep(env) && !UnderMpirun(env)) {
    // A batch script: the one dlaunch on the node runs the node's tasks.
    if (const std::string* per_node = Find(env, "SLURM_TASKS_PER_NODE")) {
      nproc = ExpandSlurmCounts(*per_node).front();
    }
  }
  if (nproc > 0) o->nproc = nproc;
}

NodeShare AgentShareOfNode(const EnvMap& env) {
  NodeShare share;
  if (InSlurmStep(env) && Find(env, "SLURM_LOCALID")) {
    share.index = IntVar(env, "SLURM_LOCALID");
    share.count = StepTasksOnNode(env);
  } else if (Find(env, "OMPI_COMM_WORLD_LOCAL_RANK") && Find(env, "OMPI_COMM_WORLD_LOCAL_SIZE")) {
    share.index = IntVar(env, "OMPI_COMM_WORLD_LOCAL_RANK");
    share.count = IntVar(env, "OMPI_COMM_WORLD_LOCAL_SIZE");
  }
  if (share.count < 1 || share.index >= share.count) return NodeShare{};
  return share;
}

PlacementRequest PlacementRequestFor(const LaunchOptions& o, const EnvMap& env) {
  PlacementRequest req;
  req.gpu_binding = o.gpu_binding;
  req.numa_binding = o.numa_binding;
  req.virtual_local_rank = o.virtual_local_rank;
  req.nproc = o.nproc;
  const NodeShare share = AgentShareOfNode(env);
  req.share_index = share.index;
  req.share_count = share.count;
  if (auto it = env.find("CUDA_VISIBLE_DEVICES"); it != env.end())
    req.cuda_visible_devices = it->second;
  for (const auto& [k, v] : o.env)
    if (k == "CUDA_VISIBLE_DEVICES") req.cuda_visible_devices = v;
  return req;
}

std::vector<RankPlacement> PlaceRanks(const LaunchOptions& o, const EnvMap& env) {
  auto placement = PlanPlacement(PlacementRequestFor(o, env), ReadTopology());
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
  const bool kubeflow = Find(env, "PET_NNODES") != nullptr;
  const std::string* addr = Find(env, "PET_MASTER_ADDR");
  const std::string* port = Find(env, "PET_MASTER_PORT");
  if (kubeflow && !addr) addr = Find(env, "MASTER_ADDR");
  if (kubeflow && !port) port = Find(env, "MASTER_PORT");
  if (addr && port && !Find(env, "PET_RDZV_ENDPOINT") && !set({"rdzv-endpoint", "rdzv_endpoint"})) {
    args.emplace_back("PET_MASTER_ADDR/PET_MASTER_PORT",
                      "--rdzv-endpoint=" + JoinEndpoint(*addr, *port));
  }
  return args;
}

}  // namespace dlaunch::launcher
