// What the cluster's engine tells a launcher beyond the node's place: Slurm steps (each task of
// an `srun` is one node agent of one job, as under mpirun), Slurm's GPUs and tasks per node, and
// Kubeflow's PET_* variables (torchrun's options, one variable each).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "launcher/cluster/slurm.h"
#include "launcher/cluster/slurm_lists.h"
#include "launcher/options.h"
#include "launcher/supervision/placement.h"

namespace dlaunch::launcher {

using EnvMap = std::map<std::string, std::string>;

// Inside an `srun` step (SLURM_STEP_ID and SLURM_STEP_NUM_TASKS set): the step's tasks form one
// job, task SLURM_PROCID being node SLURM_PROCID of SLURM_STEP_NUM_TASKS, node 0's coordinator
// on the step's first host at DLAUNCH_RDZV_PORT, else SlurmStepPort, the run id
// slurm-<job>.<step>-<time>-<random>. A --nnodes that differs from the task count (of several)
// would make several jobs share one run directory: refused; with one task the command line decides.
// Returns "slurm" when it applied, "" outside a step. Throws UsageError for malformed or
// contradicting variables.
std::string ApplySlurmStepEnv(const EnvMap& env, LaunchOptions* o);

// In a batch script (Slurm job, no step): dlaunch runs once, on the job's first node, so it is a
// single-node job named slurm-<job>-<time>-<random>; an allocation of several nodes is refused
// (exit 2) as it needs `srun` to start one launcher per node. Returns "slurm" when it applied, ""
// outside Slurm.
std::string ApplySlurmBatchEnv(const EnvMap& env, LaunchOptions* o);

// --nproc when the command line gave none: under Slurm, SLURM_GPUS_PER_TASK, else this node's
// SLURM_GPUS_ON_NODE divided among the dlaunch tasks on the node, else (in a batch script, one
// dlaunch for the node) the node's tasks. Leaves `o` alone outside Slurm.
void ApplySlurmNprocDefault(const EnvMap& env, LaunchOptions* o);

// The coordinator port of Slurm step `step_id` of job `job_id` without DLAUNCH_RDZV_PORT:
// 29400 + (job mod 375) * 8 + (step mod 8), from 29400 to 32399 (below Linux's ephemeral ports).
// Partial-node jobs share machines, so each job needs a port of its own, and every task of a
// step must find it without talking first: jobs whose ids are less than 375 apart never meet
// on one port, nor do 8 steps of one job. Does not block.
// (launcher/cluster/slurm.h)
using cluster::kSlurmPortJobs;
using cluster::kSlurmPortSteps;
using cluster::SlurmStepPort;

// Slurm's per-node counts: "2(x3),1" -> 2 2 2 1 (launcher/cluster/slurm_lists.h).
using cluster::ExpandSlurmCounts;

// Which of the node agents on this machine this one is (several under `srun -n2` on one node,
// or mpirun with two slots): index and count, {0, 1} when alone.
struct NodeShare {
  int index = 0;
  int count = 1;
};
NodeShare AgentShareOfNode(const EnvMap& env);

// What PlanPlacement needs from the options and the environment (this launcher's share of
// the machine, the ranks' CUDA_VISIBLE_DEVICES: --env's, else the inherited one).
PlacementRequest PlacementRequestFor(const LaunchOptions& o, const EnvMap& env);

// Each local rank's placement on this machine (ReadTopology), said on stderr when it binds
// anything. Throws UsageError for a binding the machine cannot give.
std::vector<RankPlacement> PlaceRanks(const LaunchOptions& o, const EnvMap& env);

// Command-line tokens ({"PET_NNODES", "--nnodes=2"}: the variable and its token) for the torchrun
// options Kubeflow's PyTorchJob passes as PET_<OPTION> variables, for each option `given(name)`
// says the command line did not set: the command line wins. PET_MASTER_ADDR and PET_MASTER_PORT
// together give --rdzv-endpoint (torchrun's static rendezvous meets there). Boolean options take 1
// or 0; a variable set but empty is an error, as in torchrun (whose int("") fails). Throws
// UsageError naming the variable.
std::vector<std::pair<std::string, std::string>> KubeflowArgs(
    const EnvMap& env, const std::function<bool(const std::string&)>& given);

// The options KubeflowArgs may produce and the names each is given under on the command line.
struct PetOption {
  const char* variable;             // PET_NPROC_PER_NODE
  std::vector<std::string> option;  // nproc-per-node, nproc, nproc_per_node: first is used
  bool is_switch = false;           // takes no value: PET_X=1 sets it
};
const std::vector<PetOption>& PetOptions();

}  // namespace dlaunch::launcher
