// Slurm: a step of `srun` (each task one node agent of one job, as under mpirun) or an sbatch
// script (one dlaunch on the job's first node), and the ranks per node Slurm's GPUs and tasks
// imply.
#pragma once

#include <cstdint>
#include <optional>

#include "launcher/cluster/cluster_place.h"

namespace dlaunch::launcher::cluster {

// Inside an `srun` step (SLURM_STEP_ID, SLURM_STEP_NUM_TASKS and SLURM_PROCID set, not under
// mpirun): task SLURM_PROCID is node SLURM_PROCID of SLURM_STEP_NUM_TASKS; node 0's coordinator on
// the step's first host (SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST) at DLAUNCH_RDZV_PORT, else
// SlurmStepPort; the run id slurm-<job>.<step>-...; the token derived from the user's secret.
std::optional<ClusterPlace> DetectSlurmStep(const EnvMap& env);

// In a batch script (SLURM_JOB_ID, no step, not under mpirun): a single-node job named
// slurm-<job>-...; nnodes carries the refusal of an allocation of several nodes, which needs
// `srun` to start one launcher per node (a command line's own --nnodes overrides it).
std::optional<ClusterPlace> DetectSlurmBatch(const EnvMap& env);

// Ranks per node in a Slurm job: SLURM_GPUS_PER_TASK, else this node's SLURM_GPUS_ON_NODE divided
// among the `share` launchers on the node, else (in a batch script) the node's tasks. Not given
// outside Slurm, or where Slurm says 0. Applies under mpirun in an allocation too.
Sourced<int> SlurmNproc(const EnvMap& env, const Sourced<NodeShare>& share);

// The coordinator port of step `step_id` of job `job_id` without DLAUNCH_RDZV_PORT:
// 29400 + (job mod 375) * 8 + (step mod 8), from 29400 to 32399 (below Linux's ephemeral ports).
// Partial-node jobs share machines, so each job needs a port of its own that every task of a step
// finds without talking first: jobs less than 375 apart never meet on one port, nor 8 steps.
inline constexpr int kSlurmBasePort = 29400;  // torchrun's c10d default
inline constexpr int kSlurmPortJobs = 375;
inline constexpr int kSlurmPortSteps = 8;
int SlurmStepPort(uint64_t job_id, uint64_t step_id);

}  // namespace dlaunch::launcher::cluster
