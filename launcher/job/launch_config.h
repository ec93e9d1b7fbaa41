// The launch as this node will run it: the parsed command line weighed once against the place
// the cluster's engine gives (launcher/cluster/), every conflict between the two decided there.
// The job layer receives it as `const LaunchConfig&` and never changes it; what only I/O can
// settle (the token file's contents, node 0's address over MPI, name lookups, free ports) is
// ResolveNodeSetup's (node_env.h), which reads the config and returns a NodeSetup.
#pragma once

#include <string>

#include "launcher/cli/options.h"
#include "launcher/cluster/cluster_place.h"
#include "launcher/job/job_plan.h"

namespace dlaunch::launcher {

// Where a node's job token comes from.
enum class TokenFrom {
  kNewRandom,         // one node: a fresh one nobody else needs
  kTokenFile,         // --token-file
  kJobTokenVariable,  // DLAUNCH_JOB_TOKEN
  kSlurmStepSecret,   // derived per Slurm step from the user's secret (slurm_token.h)
};

struct LaunchConfig {
  // The command line with the engine's place applied: nodes, node rank, endpoint, run id, the
  // scheduler's job name and ranks per node, as the job runs them.
  LaunchOptions options;
  // The engine that placed this node; kNone where the command line alone decided (no engine, an
  // engine the command line set aside, or Kubeflow, whose PET_* variables the parser reads as
  // the options they stand for).
  cluster::Engine engine = cluster::Engine::kNone;
  cluster::NodeShare share;  // this launcher's part of the machine: {0, 1} when alone
  NodeRoleKind role = NodeRoleKind::kSingleNode;
  TokenFrom token = TokenFrom::kNewRandom;
  // mpirun without --rdzv-endpoint: node 0 proposes its address and MPI carries it to the others.
  bool endpoint_over_mpi = false;
  // Many nodes: the endpoint's host must resolve (not under Kubeflow, whose workers start before
  // the master pod's name exists).
  bool check_endpoint_host = false;
  // One node with --rdzv-endpoint: its port became the ranks' MASTER_PORT and must be free.
  bool master_port_from_endpoint = false;
  // One node with --rdzv-endpoint and no --master-addr or --local-addr: this host is the ranks'
  // MASTER_ADDR if it names this machine ("" otherwise).
  std::string master_addr_if_local;
};

// The error of a multi-node launch without a usable token.
inline constexpr const char* kNeedsJobToken =
    "multi-node launches need a shared job token of at least 16 characters: --token-file FILE or "
    "DLAUNCH_JOB_TOKEN, the same on every node";

// The launch `parsed` (ParseCommandLine) describes in the environment `env`: the engine's place
// (cluster::DetectCluster) fills what the command line leaves out, a Slurm step decides the
// nodes even against --nnodes (which must then agree, but for a step of one task), and the node
// rank, TLS files, token source and endpoint are checked. `unique` ends a Slurm run id
// (slurm-<job>[.<step>]-<unique>: NewRunId()), given so that this stays pure: no environment,
// files, clock or network of its own. Throws UsageError with the one-line message of the first
// conflict.
LaunchConfig ResolveLaunch(const LaunchOptions& parsed, const cluster::EnvMap& env,
                           const std::string& unique);

// Many nodes: --master-port must not be the port of the rendezvous endpoint, where node 0's
// coordinator listens. Throws UsageError. Pure.
void CheckMasterPort(const LaunchOptions& o, const std::string& endpoint);

}  // namespace dlaunch::launcher
