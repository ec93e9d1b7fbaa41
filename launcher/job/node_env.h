// Where a multi-node launch learns its place: the command line first, then the environment of
// the engine that started dlaunch (Slurm, OpenMPI, Kubeflow's PyTorchJob).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "launcher/cluster/slurm_lists.h"
#include "launcher/job/job_plan.h"
#include "launcher/launch_checks.h"
#include "launcher/options.h"

namespace dlaunch::launcher {

// Slurm: the coordinator listens on the first host at this port, or at DLAUNCH_RDZV_PORT.
inline constexpr int kDefaultRdzvPort = 29400;  // torchrun's c10d default

// Fills nnodes, node_rank, rdzv_endpoint and run_id from `env` where the command line left them
// unset. Returns the engine it used ("slurm", "openmpi", "kubeflow") or "" for none. Throws
// UsageError for a malformed variable.
std::string ApplySchedulerEnv(const std::map<std::string, std::string>& env, LaunchOptions* o);

// Slurm's compressed host lists (launcher/cluster/slurm_lists.h).
using cluster::ExpandSlurmNodelist;

// The process environment as a map.
std::map<std::string, std::string> CurrentEnv();

// This node's role, token and TLS files: applies the scheduler's environment to `o`, reads the
// token file (given on one node too, it must be readable), and under mpirun without
// --rdzv-endpoint agrees on node 0's address over MPI (blocking until every launcher has called
// it). Many nodes: the endpoint's host must resolve (one lookup, blocking). Throws UsageError for
// what is missing or wrong.
NodeSetup ResolveNodeSetup(LaunchOptions* o);

// One node with --rdzv-endpoint HOST:PORT (torchrun's c10d rendezvous on one machine, or a
// PyTorchJob of one replica): the ranks get MASTER_PORT=PORT and, when HOST names this machine,
// MASTER_ADDR=HOST, unless --master-port or --master-addr say otherwise. The port is free for
// rank 0's store: the coordinator of a single node listens on a loopback port the kernel picks,
// and the port is checked free before any rank starts. Throws UsageError for a malformed endpoint.
// Blocks for a name lookup of HOST.
void ApplySingleNodeEndpoint(LaunchOptions* o);

// "20261201-103000-ab12": the local time and two random bytes.
std::string NewRunId();

}  // namespace dlaunch::launcher
