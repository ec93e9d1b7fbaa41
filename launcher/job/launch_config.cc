#include "launcher/job/launch_config.h"

#include "core/error.h"
#include "launcher/cluster/detect_cluster.h"
#include "launcher/cluster/env_values.h"
#include "launcher/launch_checks.h"

namespace dlaunch::launcher {
namespace {

using cluster::ClusterPlace;
using cluster::Engine;

// A Slurm step's tasks are the job's nodes, even against --nnodes, which must then agree: a
// different count would make several jobs share one run directory. A step of one task (an
// `srun --pty bash` shell) leaves a --nnodes of the user's own alone. Returns whether the step
// placed this node.
bool ApplySlurmStep(const ClusterPlace& p, LaunchOptions* o) {
  const int tasks = p.nnodes.Get();
  const int rank = p.node_rank.Get();
  if (tasks == 1 && o->nnodes_given) return false;
  if (o->nnodes_given && o->nnodes != tasks) {
    throw UsageError("--nnodes " + std::to_string(o->nnodes) + " but this Slurm step runs " +
                     std::to_string(tasks) + " dlaunch task" + (tasks == 1 ? "" : "s") +
                     ", each one node of the job: drop --nnodes (or give " + std::to_string(tasks) +
                     "), or start one task per node (srun --ntasks-per-node=1)");
  }
  o->nnodes = tasks;
  o->node_rank = rank;
  if (o->rdzv_endpoint.empty()) o->rdzv_endpoint = p.endpoint.Get();
  return true;
}

// What the place gives where the command line says nothing; returns the engine that placed the
// node (kNone when the command line's --nnodes set a batch script or mpirun aside).
Engine ApplyPlace(const ClusterPlace& p, const std::string& unique, LaunchOptions* o) {
  if (!o->nproc_given && p.nproc.given()) o->nproc = p.nproc.Get();
  switch (p.engine) {
    case Engine::kSlurmStep:
      if (!ApplySlurmStep(p, o)) return Engine::kNone;
      break;
    case Engine::kSlurmBatch:
    case Engine::kOpenMpi:
      if (o->nnodes_given) return Engine::kNone;
      o->nnodes = p.nnodes.Get();
      o->node_rank = p.node_rank.Get();
      break;
    case Engine::kKubeflow:  // PET_* are the command line's options already (ParseCommandLine)
    case Engine::kNone:
      return Engine::kNone;
  }
  if (!p.job_id.empty()) o->job_id = p.job_id;
  if (o->run_id.empty() && p.run_id.given()) {
    o->run_id = p.run_id.Get() + (p.run_id_is_stem ? "-" + unique : "");
  }
  return p.engine;
}

// One node with --rdzv-endpoint HOST:PORT (torchrun's c10d rendezvous on one machine, or a
// PyTorchJob of one replica): PORT is the ranks' MASTER_PORT, HOST their MASTER_ADDR when it names
// this machine, unless --master-port or --master-addr (or --local-addr) say otherwise.
void ResolveSingleNodeEndpoint(LaunchConfig* c) {
  LaunchOptions& o = c->options;
  const auto [host, port] = SplitEndpoint(o.rdzv_endpoint);
  if (o.master_port == 0) {
    o.master_port = port;
    c->master_port_from_endpoint = true;
  }
  if (!o.master_addr_given && o.local_addr.empty()) c->master_addr_if_local = host;
}

// Where the job token of a multi-node launch comes from; throws when from nowhere.
TokenFrom TokenOf(const ClusterPlace& place, const LaunchConfig& c, const cluster::EnvMap& env) {
  if (!c.options.token_file.empty()) return TokenFrom::kTokenFile;
  if (place.token.given() && place.token.Get() == cluster::TokenSource::kJobTokenVariable) {
    if (cluster::Find(env, "DLAUNCH_JOB_TOKEN")->size() < 16) throw UsageError(kNeedsJobToken);
    return TokenFrom::kJobTokenVariable;
  }
  // Every task of the step derives the same token from the user's secret.
  if (c.engine == Engine::kSlurmStep) return TokenFrom::kSlurmStepSecret;
  throw UsageError(kNeedsJobToken);
}

// A PyTorchJob's master port is where torchrun's agent would host its store and the ranks' too;
// dlaunch's coordinator takes it, so the ranks get another one: said once.
void NoteKubeflowMasterPort(const cluster::EnvMap& env, int coordinator_port, LaunchOptions* o) {
  const char* pet_port = cluster::Find(env, "PET_MASTER_PORT") ? "PET_MASTER_PORT" : "MASTER_PORT";
  const std::string* port = cluster::Find(env, pet_port);
  if (!port || *port != std::to_string(coordinator_port)) return;
  o->notes.push_back("Kubeflow: dlaunch's coordinator listens on the rendezvous endpoint " +
                     o->rdzv_endpoint + " (" + pet_port + "), so the ranks' MASTER_PORT is " +
                     (o->master_port ? "--master-port's " + std::to_string(o->master_port)
                                     : std::string("another port of node 0, free at the start")) +
                     ", where rank 0's TCPStore listens");
}

// Many nodes: the role, the token, TLS and node 0's endpoint.
void ResolveMultiNode(const ClusterPlace& place, const cluster::EnvMap& env, LaunchConfig* c) {
  LaunchOptions& o = c->options;
  // An engine's variables name the node; else the coordinator ranks nodes in join order.
  if (c->engine != Engine::kNone) o.node_rank_given = true;
  c->role = !o.node_rank_given ? NodeRoleKind::kElected
            : o.node_rank == 0 ? NodeRoleKind::kCoordinatorHost
                               : NodeRoleKind::kJoiningNode;
  c->token = TokenOf(place, *c, env);
  const bool tls = !o.tls_ca.empty() || !o.tls_cert.empty() || !o.tls_key.empty();
  if (tls && (o.tls_ca.empty() || o.tls_cert.empty() || o.tls_key.empty())) {
    throw UsageError("TLS needs all of --tls-cert, --tls-key and --tls-ca");
  }
  const bool kubeflow = place.engine == Engine::kKubeflow;
  c->check_endpoint_host = !kubeflow;
  if (o.rdzv_endpoint.empty()) {
    if (c->engine != Engine::kOpenMpi) {
      throw UsageError("--nnodes " + std::to_string(o.nnodes) +
                       " needs --rdzv-endpoint host:port (node 0's address)");
    }
    c->endpoint_over_mpi = true;  // the port is checked once MPI has agreed on it
    return;
  }
  CheckMasterPort(o, o.rdzv_endpoint);
  if (kubeflow) NoteKubeflowMasterPort(env, SplitEndpoint(o.rdzv_endpoint).second, &o);
}

}  // namespace

void CheckMasterPort(const LaunchOptions& o, const std::string& endpoint) {
  if (o.master_port != SplitEndpoint(endpoint).second) return;
  throw UsageError("--master-port " + std::to_string(o.master_port) +
                   " is the port of the rendezvous endpoint " + endpoint +
                   ", where node 0's coordinator listens: give the ranks another one, or leave "
                   "it out for a free one");
}

LaunchConfig ResolveLaunch(const LaunchOptions& parsed, const cluster::EnvMap& env,
                           const std::string& unique) {
  LaunchConfig c;
  c.options = parsed;
  LaunchOptions& o = c.options;
  const ClusterPlace place = cluster::DetectCluster(env);
  c.engine = ApplyPlace(place, unique, &o);
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    const std::string engine = cluster::EngineName(c.engine);
    throw UsageError("node rank " + std::to_string(o.node_rank) + " is outside [0, " +
                     std::to_string(o.nnodes) + ")" +
                     (engine.empty() ? "" : " (from " + engine + ")"));
  }
  if (o.nnodes == 1) {
    if (!o.tls_ca.empty() || !o.tls_cert.empty() || !o.tls_key.empty()) {
      throw UsageError("--tls-* options are for multi-node launches");
    }
    // The user's endpoint (or Kubeflow's), not one a Slurm step of one task derives for itself.
    if (!parsed.rdzv_endpoint.empty()) ResolveSingleNodeEndpoint(&c);
  } else {
    ResolveMultiNode(place, env, &c);
  }
  if (place.share.given()) c.share = place.share.Get();
  return c;
}

}  // namespace dlaunch::launcher
