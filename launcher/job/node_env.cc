#include "launcher/job/node_env.h"

#include <unistd.h>

#include <cctype>
#include <ctime>

#include "core/base/format.h"
#include "core/base/proc.h"
#include "core/error.h"
#include "launcher/job/slurm_token.h"
#include "launcher/launch_checks.h"
#include "launcher/rendezvous/mpi_rendezvous.h"
#include "launcher/rendezvous/ports.h"

namespace dlaunch::launcher {
namespace {

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// On one node with --rdzv-endpoint (ResolveLaunch made its port MASTER_PORT): the port must be
// free for rank 0's store, and the host is MASTER_ADDR when it names this machine.
void UseSingleNodeEndpoint(const LaunchConfig& c, NodeSetup* setup) {
  const LaunchOptions& o = c.options;
  if (c.master_port_from_endpoint && !PortIsFree("0.0.0.0", o.master_port)) {
    throw UsageError("--rdzv-endpoint " + o.rdzv_endpoint +
                     ": the port is in use on this machine, and on one node it is the ranks' "
                     "MASTER_PORT, where rank 0's TCPStore listens (give a free one, or leave "
                     "--rdzv-endpoint out)");
  }
  if (c.master_addr_if_local.empty()) return;
  if (IsLocalAddress(c.master_addr_if_local)) {
    setup->master_addr = c.master_addr_if_local;
  } else {
    setup->notes.push_back("--rdzv-endpoint " + o.rdzv_endpoint + ": " + c.master_addr_if_local +
                           " is not this machine, so the ranks' MASTER_ADDR stays " +
                           o.master_addr + " (this job has one node)");
  }
}

// The job token every node presents, from where ResolveLaunch said.
void ReadToken(const LaunchConfig& c, const std::map<std::string, std::string>& env,
               NodeSetup* setup) {
  switch (c.token) {
    case TokenFrom::kTokenFile:
      setup->token = Trim(base::ReadWholeFile(c.options.token_file, "--token-file"));
      break;
    case TokenFrom::kJobTokenVariable:
      setup->token = env.at("DLAUNCH_JOB_TOKEN");
      break;
    case TokenFrom::kSlurmStepSecret: {
      // Every task of the step derives the same token from the user's secret (slurm_token.h).
      const std::string secret = DefaultJobSecretPath();
      setup->token = SlurmStepToken(env, secret);
      setup->token_origin =
          "this Slurm step's job token comes from " + secret +
          ", which must be the same file on every node (a home directory the "
          "nodes share); else export DLAUNCH_JOB_TOKEN=$(openssl rand -hex 16) before "
          "srun, which passes it to every task";
      break;
    }
    case TokenFrom::kNewRandom:
      setup->token = base::RandomHex(16);
      break;
  }
  if (setup->token.size() < 16) throw UsageError(kNeedsJobToken);
}

}  // namespace

std::string NewRunId() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
  return std::string(buf) + "-" + base::RandomHex(2);
}

NodeSetup ResolveNodeSetup(const LaunchConfig& config,
                           const std::map<std::string, std::string>& env) {
  const LaunchOptions& o = config.options;
  NodeSetup setup;
  // Given on one node too, it must be readable.
  if (!o.token_file.empty()) CheckTokenFile(o.token_file);
  setup.role = config.role;
  setup.tls = {o.tls_ca, o.tls_cert, o.tls_key};
  if (config.role == NodeRoleKind::kSingleNode) {
    UseSingleNodeEndpoint(config, &setup);
    setup.token = base::RandomHex(16);
    return setup;
  }
  ReadToken(config, env, &setup);
  setup.endpoint = o.rdzv_endpoint;
  if (config.endpoint_over_mpi) {
    // Node 0 proposes its own address and a free port; MPI carries it to every launcher.
    std::string proposal;
    if (o.node_rank == 0) {
      proposal = (o.master_addr != "127.0.0.1" ? o.master_addr : base::Hostname()) + ":" +
                 std::to_string(PickFreePort("0.0.0.0"));
    }
    setup.endpoint = AgreeOverMpi(proposal);
    CheckMasterPort(o, setup.endpoint);
  }
  // A name that does not exist would be retried until the join timeout, minutes later.
  if (config.check_endpoint_host) {
    CheckHostResolves(SplitEndpoint(setup.endpoint).first, "--rdzv-endpoint " + setup.endpoint,
                      &setup.notes);
  }
  return setup;
}

}  // namespace dlaunch::launcher
