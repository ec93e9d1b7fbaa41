#include "launcher/cluster/slurm.h"

#include <algorithm>

#include "launcher/cluster/env_values.h"
#include "launcher/cluster/slurm_lists.h"

namespace dlaunch::launcher::cluster {
namespace {

// mpirun inside an allocation starts the launchers itself (or through an srun of its daemons):
// its variables, not Slurm's, say which node a launcher is.
bool UnderMpirun(const EnvMap& env) { return Find(env, "OMPI_COMM_WORLD_SIZE") != nullptr; }

bool InSlurmStep(const EnvMap& env) {
  return Find(env, "SLURM_STEP_ID") && Find(env, "SLURM_STEP_NUM_TASKS") &&
         Find(env, "SLURM_PROCID") && !UnderMpirun(env);
}

// A Slurm job or step id; an unset one reads as empty, and is refused the same way.
uint64_t IdVar(const EnvMap& env, const char* key) {
  const auto it = env.find(key);
  const std::string text = it == env.end() ? "" : it->second;
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
  const int node = ParseCount(env.at("SLURM_NODEID"), "SLURM_NODEID");
  if (node >= static_cast<int>(counts.size())) {
    throw UsageError("SLURM_NODEID=" + std::to_string(node) + " but SLURM_STEP_TASKS_PER_NODE='" +
                     *per_node + "' lists " + std::to_string(counts.size()) + " nodes");
  }
  return std::max(1, counts[node]);
}

// SLURM_LOCALID of SLURM_STEP_TASKS_PER_NODE: several tasks of one step on one machine.
Sourced<NodeShare> StepShare(const EnvMap& env) {
  const std::string from = "SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE";
  if (!Find(env, "SLURM_LOCALID")) return {};
  try {
    NodeShare share;
    share.index = ParseCount(env.at("SLURM_LOCALID"), "SLURM_LOCALID");
    share.count = StepTasksOnNode(env);
    return Sourced<NodeShare>::Of(Normalized(share), from);
  } catch (const UsageError& e) {
    return Sourced<NodeShare>::Bad(from, e.what());
  }
}

// Node 0 of the step: the first host of its node list, at DLAUNCH_RDZV_PORT or the step's port.
Sourced<std::string> StepEndpoint(const EnvMap& env) {
  const char* list_key =
      Find(env, "SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
  const std::string* port = Find(env, "DLAUNCH_RDZV_PORT");
  const std::string from =
      std::string(list_key) + ", " + (port ? "DLAUNCH_RDZV_PORT" : "SLURM_JOB_ID, SLURM_STEP_ID");
  try {
    const std::string* nodes = Find(env, list_key);
    if (!nodes) throw UsageError("SLURM_STEP_NODELIST is not set: cannot find node 0 of the step");
    const std::string host = ExpandSlurmNodelist(*nodes).front();
    return Sourced<std::string>::Of(
        host + ":" +
            (port ? *port
                  : std::to_string(
                        SlurmStepPort(IdVar(env, "SLURM_JOB_ID"), IdVar(env, "SLURM_STEP_ID")))),
        from);
  } catch (const UsageError& e) {
    return Sourced<std::string>::Bad(from, e.what());
  }
}

// slurm-<job>[.<step>]: the launcher appends -<time>-<random>, so a second dlaunch in the same
// batch script or step gets a run directory of its own. Node 0's is the job's.
void SetRunId(const std::string& job, const std::string& from, ClusterPlace* place) {
  place->run_id = Sourced<std::string>::Of("slurm-" + job, from);
  place->run_id_is_stem = true;
}

}  // namespace

int SlurmStepPort(uint64_t job_id, uint64_t step_id) {
  return kSlurmBasePort + static_cast<int>(job_id % kSlurmPortJobs) * kSlurmPortSteps +
         static_cast<int>(step_id % kSlurmPortSteps);
}

std::optional<ClusterPlace> DetectSlurmStep(const EnvMap& env) {
  if (!InSlurmStep(env)) return std::nullopt;
  ClusterPlace place;
  place.engine = Engine::kSlurmStep;
  place.nnodes = CountVar(env, "SLURM_STEP_NUM_TASKS");
  place.node_rank = CountVar(env, "SLURM_PROCID");
  place.endpoint = StepEndpoint(env);
  if (Find(env, "SLURM_JOB_ID")) {
    const std::string step = env.at("SLURM_JOB_ID") + "." + env.at("SLURM_STEP_ID");
    place.job_id = "Slurm step " + step;
    SetRunId(step, "SLURM_JOB_ID, SLURM_STEP_ID", &place);
  }
  place.share = StepShare(env);
  place.nproc = SlurmNproc(env, place.share);
  // Every task of the step derives the same token from the user's secret (job/slurm_token.h).
  place.token =
      Sourced<TokenSource>::Of(TokenSource::kSlurmStepSecret, "SLURM_JOB_ID, SLURM_STEP_ID");
  return place;
}

std::optional<ClusterPlace> DetectSlurmBatch(const EnvMap& env) {
  if (!Find(env, "SLURM_JOB_ID") || InSlurmStep(env) || UnderMpirun(env)) return std::nullopt;
  ClusterPlace place;
  place.engine = Engine::kSlurmBatch;
  const char* key = Find(env, "SLURM_NNODES") ? "SLURM_NNODES" : "SLURM_JOB_NUM_NODES";
  place.nnodes = Find(env, key) ? CountVar(env, key) : Sourced<int>::Of(1, "SLURM_JOB_ID");
  if (place.nnodes.value && *place.nnodes.value > 1) {
    const int nodes = *place.nnodes.value;
    place.nnodes = Sourced<int>::Bad(
        key, "this Slurm job has " + std::to_string(nodes) +
                 " nodes but dlaunch runs in its batch script, on one of them: start it "
                 "with `srun --ntasks-per-node=1 dlaunch ...` so every node runs one");
  } else if (place.nnodes.value) {
    place.nnodes.value = 1;  // a job of 0 nodes is still the one this script runs on
  }
  place.node_rank = Sourced<int>::Of(0, place.nnodes.source);
  SetRunId(env.at("SLURM_JOB_ID"), "SLURM_JOB_ID", &place);
  place.nproc = SlurmNproc(env, {});
  return place;
}

Sourced<int> SlurmNproc(const EnvMap& env, const Sourced<NodeShare>& share) {
  if (!Find(env, "SLURM_JOB_ID")) return {};
  const char* key = nullptr;
  try {
    int nproc = 0;
    if (const std::string* per_task = Find(env, key = "SLURM_GPUS_PER_TASK")) {
      nproc = GpuCount(*per_task, key);
    } else if (const std::string* on_node = Find(env, key = "SLURM_GPUS_ON_NODE")) {
      const int count = share.given() ? share.Get().count : 1;
      nproc = GpuCount(*on_node, key) / count;
    } else if (!InSlurmStep(env) && !UnderMpirun(env)) {
      // A batch script: the one dlaunch on the node runs the node's tasks.
      if (const std::string* per_node = Find(env, key = "SLURM_TASKS_PER_NODE")) {
        nproc = ExpandSlurmCounts(*per_node).front();
      }
    }
    if (nproc > 0) return Sourced<int>::Of(nproc, key);
    return {};
  } catch (const UsageError& e) {
    return Sourced<int>::Bad(key, e.what());
  }
}

}  // namespace dlaunch::launcher::cluster
