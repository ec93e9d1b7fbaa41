#include "launcher/job/node_env.h"

#include <unistd.h>

#include <cctype>
#include <ctime>

#include "core/base/format.h"
#include "core/base/proc.h"
#include "core/error.h"
#include "launcher/job/cluster_env.h"
#include "launcher/job/slurm_token.h"
#include "launcher/rendezvous/mpi_rendezvous.h"
#include "launcher/rendezvous/ports.h"

extern char** environ;

namespace dlaunch::launcher {
namespace {

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

int ToInt(const std::map<std::string, std::string>& env, const char* key) {
  auto it = env.find(key);
  try {
    size_t used = 0;
    int v = std::stoi(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  throw UsageError(std::string(key) + "='" + it->second + "' is not an integer");
}

bool Has(const std::map<std::string, std::string>& env, const char* key) {
  auto it = env.find(key);
  return it != env.end() && !it->second.empty();
}

}  // namespace

std::string ApplySchedulerEnv(const std::map<std::string, std::string>& env, LaunchOptions* o) {
  ApplySlurmNprocDefault(env, o);
  if (std::string engine = ApplySlurmStepEnv(env, o); !engine.empty()) return engine;
  if (o->nnodes_given) return "";
  if (std::string engine = ApplySlurmBatchEnv(env, o); !engine.empty()) return engine;
  if (Has(env, "OMPI_COMM_WORLD_SIZE") && Has(env, "OMPI_COMM_WORLD_RANK")) {
    o->nnodes = ToInt(env, "OMPI_COMM_WORLD_SIZE");
    o->node_rank = ToInt(env, "OMPI_COMM_WORLD_RANK");
    return "openmpi";
  }
  if (Has(env, "PET_NNODES") && Has(env, "PET_NODE_RANK")) {
    o->nnodes = ToInt(env, "PET_NNODES");
    o->node_rank = ToInt(env, "PET_NODE_RANK");
    if (o->rdzv_endpoint.empty() && Has(env, "MASTER_ADDR") && Has(env, "MASTER_PORT")) {
      o->rdzv_endpoint = JoinEndpoint(env.at("MASTER_ADDR"), env.at("MASTER_PORT"));
    }
    return "kubeflow";
  }
  return "";
}

std::map<std::string, std::string> CurrentEnv() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::string NewRunId() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
  return std::string(buf) + "-" + base::RandomHex(2);
}

void ApplySingleNodeEndpoint(LaunchOptions* o) {
  if (o->nnodes != 1 || o->rdzv_endpoint.empty()) return;
  const auto [host, port] = SplitEndpoint(o->rdzv_endpoint);
  if (o->master_port == 0) {
    if (!PortIsFree("0.0.0.0", port)) {
      throw UsageError("--rdzv-endpoint " + o->rdzv_endpoint +
                       ": the port is in use on this machine, and on one node it is the ranks' "
                       "MASTER_PORT, where rank 0's TCPStore listens (give a free one, or leave "
                       "--rdzv-endpoint out)");
    }
    o->master_port = port;
  }
  if (o->master_addr_given || !o->local_addr.empty()) return;  // --local-addr is MASTER_ADDR
  if (IsLocalAddress(host)) {
    o->master_addr = host;
  } else {
    o->notes.push_back("--rdzv-endpoint " + o->rdzv_endpoint + ": " + host +
                       " is not this machine, so the ranks' MASTER_ADDR stays " + o->master_addr +
                       " (this job has one node)");
  }
}

NodeSetup ResolveNodeSetup(LaunchOptions* o) {
  NodeSetup setup;
  const std::map<std::string, std::string> env = CurrentEnv();
  // The user's endpoint (or Kubeflow's), not one a Slurm step of one task derives for itself.
  const bool endpoint_given = !o->rdzv_endpoint.empty();
  const std::string engine = ApplySchedulerEnv(env, o);
  if (o->node_rank < 0 || o->node_rank >= o->nnodes) {
    throw UsageError("node rank " + std::to_string(o->node_rank) + " is outside [0, " +
                     std::to_string(o->nnodes) + ")" +
                     (engine.empty() ? "" : " (from " + engine + ")"));
  }
  if (!o->token_file.empty()) CheckTokenFile(o->token_file);
  setup.tls = {o->tls_ca, o->tls_cert, o->tls_key};
  if (o->nnodes == 1) {
    if (setup.tls.enabled()) throw UsageError("--tls-* options are for multi-node launches");
    if (endpoint_given) ApplySingleNodeEndpoint(o);
    setup.role = NodeRoleKind::kSingleNode;
    setup.token = base::RandomHex(16);
    return setup;
  }
  // A scheduler's variables name the node; else the coordinator ranks nodes in join order.
  if (!engine.empty()) o->node_rank_given = true;
  setup.role = !o->node_rank_given ? NodeRoleKind::kElected
               : o->node_rank == 0 ? NodeRoleKind::kCoordinatorHost
                                   : NodeRoleKind::kJoiningNode;
  if (!o->token_file.empty()) {
    setup.token = Trim(base::ReadWholeFile(o->token_file, "--token-file"));
  } else if (const char* t = std::getenv("DLAUNCH_JOB_TOKEN"); t && *t) {
    setup.token = t;
  } else if (engine == "slurm") {
    // Every task of the step derives the same token from the user's secret (slurm_token.h).
    const std::string secret = DefaultJobSecretPath();
    setup.token = SlurmStepToken(env, secret);
    setup.token_origin =
        "this Slurm step's job token comes from " + secret +
        ", which must be the same file on every node (a home directory the "
        "nodes share); else export DLAUNCH_JOB_TOKEN=$(openssl rand -hex 16) before "
        "srun, which passes it to every task";
  }
  if (setup.token.size() < 16) {
    throw UsageError(
        "multi-node launches need a shared job token of at least 16 characters: "
        "--token-file FILE or DLAUNCH_JOB_TOKEN, the same on every node");
  }
  if (setup.tls.enabled() &&
      (setup.tls.ca.empty() || setup.tls.cert.empty() || setup.tls.key.empty())) {
    throw UsageError("TLS needs all of --tls-cert, --tls-key and --tls-ca");
  }
  if (o->rdzv_endpoint.empty()) {
    if (engine != "openmpi") {
      throw UsageError("--nnodes " + std::to_string(o->nnodes) +
                       " needs --rdzv-endpoint host:port (node 0's address)");
    }
    // Node 0 proposes its own address and a free port; MPI carries it to every launcher.
    std::string proposal;
    if (o->node_rank == 0) {
      proposal = (o->master_addr != "127.0.0.1" ? o->master_addr : base::Hostname()) + ":" +
                 std::to_string(PickFreePort("0.0.0.0"));
    }
    o->rdzv_endpoint = AgreeOverMpi(proposal);
  }
  const auto [coordinator_host, coordinator_port] = SplitEndpoint(o->rdzv_endpoint);
  // A name that does not exist would be retried until the join timeout, minutes later. Not under
  // Kubeflow: a PyTorchJob's workers start before the master pod's DNS record exists.
  if (!Has(env, "PET_NNODES")) {
    CheckHostResolves(coordinator_host, "--rdzv-endpoint " + o->rdzv_endpoint, &o->notes);
  }
  if (o->master_port == coordinator_port) {
    throw UsageError("--master-port " + std::to_string(o->master_port) +
                     " is the port of the rendezvous endpoint " + o->rdzv_endpoint +
                     ", where node 0's coordinator listens: give the ranks another one, or leave "
                     "it out for a free one");
  }
  const char* pet_port = Has(env, "PET_MASTER_PORT") ? "PET_MASTER_PORT" : "MASTER_PORT";
  if (Has(env, "PET_NNODES") && Has(env, pet_port) &&
      env.at(pet_port) == std::to_string(coordinator_port)) {
    // torchrun's agent would host its store there and hand the ranks the same port.
    o->notes.push_back("Kubeflow: dlaunch's coordinator listens on the rendezvous endpoint " +
                       o->rdzv_endpoint + " (" + pet_port + "), so the ranks' MASTER_PORT is " +
                       (o->master_port ? "--master-port's " + std::to_string(o->master_port)
                                       : std::string("another port of node 0, free at the start")) +
                       ", where rank 0's TCPStore listens");
  }
  setup.endpoint = o->rdzv_endpoint;
  return setup;
}

}  // namespace dlaunch::launcher
