// ResolveLaunch, table-driven: each environment of cluster_fixtures.cc under a command line, and
// the launch it resolves to (one line: engine, nodes, node rank, endpoint, run id, job, ranks per
// node, share of the machine, role, token source) or the one-line UsageError of its conflict.
// Then what ResolveNodeSetup settles with I/O on one node: the endpoint's port and host.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <set>

#include "core/error.h"
#include "launcher/cli/options.h"
#include "launcher/job/launch_config.h"
#include "launcher/job/node_env.h"
#include "tests/cluster/cluster_fixtures.h"

namespace dlaunch::launcher {
namespace {

const char* RoleName(NodeRoleKind role) {
  switch (role) {
    case NodeRoleKind::kSingleNode:
      return "single";
    case NodeRoleKind::kCoordinatorHost:
      return "host";
    case NodeRoleKind::kJoiningNode:
      return "joining";
    case NodeRoleKind::kElected:
      return "elected";
  }
  return "?";
}

const char* TokenName(TokenFrom token) {
  switch (token) {
    case TokenFrom::kNewRandom:
      return "random";
    case TokenFrom::kTokenFile:
      return "file";
    case TokenFrom::kJobTokenVariable:
      return "variable";
    case TokenFrom::kSlurmStepSecret:
      return "slurm-secret";
  }
  return "?";
}

// The config in one line; fields at their defaults are left out.
std::string Line(const LaunchConfig& c) {
  const LaunchOptions& o = c.options;
  const std::string engine = cluster::EngineName(c.engine);
  std::string s = (engine.empty() ? "-" : engine) +
                  " nnodes=" + (o.min_nodes ? std::to_string(o.min_nodes) + ":" : "") +
                  std::to_string(o.nnodes) + " node_rank=" + std::to_string(o.node_rank) +
                  (o.node_rank_given ? "(given)" : "");
  if (!o.rdzv_endpoint.empty()) s += " endpoint=" + o.rdzv_endpoint;
  if (!o.run_id.empty()) s += " run_id=" + o.run_id;
  if (!o.job_id.empty()) s += " job='" + o.job_id + "'";
  s += " nproc=" + std::to_string(o.nproc);
  if (c.share.count != 1) {
    s += " share=" + std::to_string(c.share.index) + "/" + std::to_string(c.share.count);
  }
  s += std::string(" ") + RoleName(c.role) + " token=" + TokenName(c.token);
  if (c.endpoint_over_mpi) s += " endpoint-over-mpi";
  if (o.nnodes > 1 && !c.check_endpoint_host) s += " no-lookup";
  if (o.master_port) {
    s += " master_port=" + std::to_string(o.master_port) +
         (c.master_port_from_endpoint ? "(endpoint)" : "");
  }
  if (!c.master_addr_if_local.empty()) s += " master_addr_if_local=" + c.master_addr_if_local;
  for (const std::string& note : o.notes) s += " note='" + note + "'";
  return s;
}

const cluster::EnvMap& Env(const std::string& fixture) {
  static const std::map<std::string, cluster::EnvMap> kEnvs = [] {
    std::map<std::string, cluster::EnvMap> envs;
    for (const cluster::EnvFixture& f : cluster::EnvFixtures()) envs[f.name] = f.env;
    return envs;
  }();
  return kEnvs.at(fixture);
}

// ParseCommandLine then ResolveLaunch, as RunJob calls them; a Slurm run id ends in "*".
std::string Resolve(const std::string& fixture, std::vector<std::string> args) {
  args.push_back("prog");
  try {
    return Line(ResolveLaunch(ParseCommandLine(args, Env(fixture)), Env(fixture), "*"));
  } catch (const UsageError& e) {
    return std::string("error: ") + e.what();
  }
}

struct Case {
  std::string fixture;  // a cluster_fixtures.cc environment, by name
  std::vector<std::string> args;
  std::string expect;  // Line(config), or "error: " and the UsageError's text
};

const std::string kNoToken = std::string("error: ") + kNeedsJobToken;

// Every fixture alone, then the command lines that meet or contradict it.
const std::vector<Case>& Cases() {
  static const std::vector<Case> kCases = {
      {"srun task 0",
       {},
       "slurm nnodes=2 node_rank=0(given) endpoint=localhost:29456 run_id=slurm-7.0-* job='Slurm "
       "step 7.0' nproc=1 share=0/2 host token=slurm-secret"},
      {"srun task 1",
       {},
       "slurm nnodes=2 node_rank=1(given) endpoint=localhost:29456 run_id=slurm-7.0-* job='Slurm "
       "step 7.0' nproc=1 share=1/2 joining token=slurm-secret"},
      {"srun two nodes",
       {},
       "slurm nnodes=4 node_rank=3(given) endpoint=gpu03:29458 run_id=slurm-7.2-* job='Slurm step "
       "7.2' nproc=1 share=1/2 joining token=slurm-secret"},
      {"srun DLAUNCH_RDZV_PORT",
       {},
       "slurm nnodes=4 node_rank=3(given) endpoint=gpu03:5000 run_id=slurm-7.2-* job='Slurm step "
       "7.2' nproc=1 share=1/2 joining token=slurm-secret"},
      {"srun GPUs on node",
       {},
       "slurm nnodes=2 node_rank=0(given) endpoint=localhost:29456 run_id=slurm-7.0-* job='Slurm "
       "step 7.0' nproc=4 share=0/2 host token=slurm-secret"},
      {"srun GPUs per task",
       {},
       "slurm nnodes=2 node_rank=0(given) endpoint=localhost:29456 run_id=slurm-7.0-* job='Slurm "
       "step 7.0' nproc=2 share=0/2 host token=slurm-secret"},
      {"srun job node list only",
       {},
       "slurm nnodes=2 node_rank=1(given) endpoint=n1:29456 run_id=slurm-7.0-* job='Slurm step "
       "7.0' nproc=1 share=1/2 joining token=slurm-secret"},
      {"srun one task (srun --pty bash)",
       {},
       "slurm nnodes=1 node_rank=0 endpoint=localhost:29456 run_id=slurm-7.0-* job='Slurm step "
       "7.0' nproc=1 single token=random"},
      {"srun with DLAUNCH_JOB_TOKEN",
       {},
       "slurm nnodes=2 node_rank=0(given) endpoint=localhost:29456 run_id=slurm-7.0-* job='Slurm "
       "step 7.0' nproc=1 share=0/2 host token=variable"},
      {"srun without SLURM_JOB_ID, own port",
       {},
       "slurm nnodes=2 node_rank=1(given) endpoint=localhost:6000 nproc=1 share=1/2 joining "
       "token=slurm-secret"},
      {"srun bad SLURM_PROCID", {}, "error: SLURM_PROCID='zero' is not a non-negative integer"},
      {"srun bad SLURM_STEP_NUM_TASKS",
       {},
       "error: SLURM_STEP_NUM_TASKS='-2' is not a non-negative integer"},
      {"srun bad job id", {}, "error: SLURM_JOB_ID='8x' is not a Slurm id"},
      {"srun no node list",
       {},
       "error: SLURM_STEP_NODELIST is not set: cannot find node 0 of the step"},
      {"srun malformed node list",
       {},
       "error: malformed range '3-1' in Slurm node list 'gpu[3-1]'"},
      {"srun node id past the task list",
       {},
       "error: SLURM_NODEID=3 but SLURM_STEP_TASKS_PER_NODE='2' lists 1 nodes"},
      {"srun bad GPU count", {}, "error: SLURM_GPUS_PER_TASK='two' is not a non-negative integer"},
      {"srun without SLURM_JOB_ID", {}, "error: SLURM_JOB_ID='' is not a Slurm id"},
      {"srun task past the step's tasks", {}, "error: node rank 2 is outside [0, 2) (from slurm)"},
      {"srun beside PET_NNODES",
       {},
       "error: --nnodes 3 but this Slurm step runs 2 dlaunch tasks, each one node of the job: drop "
       "--nnodes (or give 2), or start one task per node (srun --ntasks-per-node=1)"},
      {"sbatch one node",
       {},
       "slurm nnodes=1 node_rank=0 run_id=slurm-8-* nproc=2 single token=random"},
      {"sbatch GPUs on node",
       {},
       "slurm nnodes=1 node_rank=0 run_id=slurm-8-* nproc=4 single token=random"},
      {"sbatch SLURM_JOB_NUM_NODES",
       {},
       "slurm nnodes=1 node_rank=0 run_id=slurm-8-* nproc=2 single token=random"},
      {"sbatch no node count",
       {},
       "slurm nnodes=1 node_rank=0 run_id=slurm-8-* nproc=1 single token=random"},
      {"sbatch on two nodes",
       {},
       "error: this Slurm job has 2 nodes but dlaunch runs in its batch script, on one of them: "
       "start it with `srun --ntasks-per-node=1 dlaunch ...` so every node runs one"},
      {"sbatch bad SLURM_NNODES", {}, "error: SLURM_NNODES='two' is not a non-negative integer"},
      {"sbatch bad task counts", {}, "error: malformed Slurm task count '2(x'"},
      {"mpirun", {}, kNoToken},
      {"mpirun two slots on a machine", {}, kNoToken},
      {"mpirun in a Slurm allocation", {}, kNoToken},
      {"mpirun daemon's srun step", {}, kNoToken},
      {"mpirun rank past its size", {}, "error: node rank 5 is outside [0, 2) (from openmpi)"},
      {"mpirun bad size", {}, "error: OMPI_COMM_WORLD_SIZE='two' is not an integer"},
      {"mpirun bad local rank", {}, kNoToken},
      {"mpirun local rank past the local size", {}, kNoToken},
      {"PyTorchJob master", {}, kNoToken},
      {"PyTorchJob worker", {}, kNoToken},
      {"PyTorchJob of an older operator", {}, kNoToken},
      {"elastic PyTorchJob", {}, kNoToken},
      {"PyTorchJob IPv6 master", {}, kNoToken},
      {"PyTorchJob bad PET_NNODES",
       {},
       "error: PET_NNODES: --nnodes must be N or MIN:MAX with 1 <= MIN <= MAX (got 'many')"},
      {"PyTorchJob PET_NNODES MIN > MAX",
       {},
       "error: PET_NNODES: --nnodes 3:1: MIN must not be larger than MAX"},
      {"PyTorchJob empty PET_NNODES",
       {},
       "error: PET_NNODES is set but empty: give it a value, or unset it"},
      {"PyTorchJob bad PET_NODE_RANK",
       {},
       "error: PET_NODE_RANK: the argument ('one') for option '--node-rank' is invalid"},
      {"PyTorchJob bad endpoint",
       {},
       "error: PET_RDZV_ENDPOINT: --rdzv-endpoint 'a:b:c:1' is not host:port: more than one ':' "
       "(an IPv6 address goes in brackets, as in [::1]:29400)"},
      {"PyTorchJob node rank past its nodes", {}, "error: --node-rank must be in [0, 2)"},
      {"PyTorchJob inside an sbatch script", {}, kNoToken},
      {"none", {}, "- nnodes=1 node_rank=0 nproc=1 single token=random"},
      {"plain torchrun variables", {}, "- nnodes=1 node_rank=0 nproc=1 single token=random"},
      {"torchrun option from PET_NPROC_PER_NODE only",
       {},
       "- nnodes=1 node_rank=0 nproc=2 single token=random"},
      {"DLAUNCH_JOB_TOKEN only", {}, "- nnodes=1 node_rank=0 nproc=1 single token=random"},
      {"short DLAUNCH_JOB_TOKEN", {}, "- nnodes=1 node_rank=0 nproc=1 single token=random"},
      {"empty Slurm variables", {}, "- nnodes=1 node_rank=0 nproc=1 single token=random"},
      {"srun task 1",
       {"--nnodes", "2"},
       "slurm nnodes=2 node_rank=1(given) endpoint=localhost:29456 run_id=slurm-7.0-* job='Slurm "
       "step 7.0' nproc=1 share=1/2 joining token=slurm-secret"},
      {"srun task 1",
       {"--nnodes", "1"},
       "error: --nnodes 1 but this Slurm step runs 2 dlaunch tasks, each one node of the job: drop "
       "--nnodes (or give 2), or start one task per node (srun --ntasks-per-node=1)"},
      {"srun two nodes",
       {"--nnodes", "2"},
       "error: --nnodes 2 but this Slurm step runs 4 dlaunch tasks, each one node of the job: drop "
       "--nnodes (or give 4), or start one task per node (srun --ntasks-per-node=1)"},
      {"srun task 1",
       {"--rdzv-endpoint", "n9:1234", "--rdzv-id", "mine", "--nproc", "3", "--token-file", "tok"},
       "slurm nnodes=2 node_rank=1(given) endpoint=n9:1234 run_id=mine job='Slurm step 7.0' "
       "nproc=3 share=1/2 joining token=file"},
      {"srun one task (srun --pty bash)",
       {"--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "n9:1234", "--token-file", "tok"},
       "- nnodes=2 node_rank=1(given) endpoint=n9:1234 nproc=1 joining token=file"},
      {"srun one task (srun --pty bash)",
       {"--nnodes", "2", "--token-file", "tok"},
       "error: --nnodes 2 needs --rdzv-endpoint host:port (node 0's address)"},
      {"srun bad job id",
       {"--rdzv-endpoint", "n9:1234"},
       "slurm nnodes=2 node_rank=0(given) endpoint=n9:1234 run_id=slurm-8x.0-* job='Slurm step "
       "8x.0' nproc=1 share=0/2 host token=slurm-secret"},
      {"srun without SLURM_JOB_ID",
       {"--rdzv-endpoint", "n9:1234"},
       "slurm nnodes=2 node_rank=1(given) endpoint=n9:1234 nproc=1 share=1/2 joining "
       "token=slurm-secret"},
      {"srun bad GPU count",
       {"--nproc", "3"},
       "slurm nnodes=2 node_rank=0(given) endpoint=localhost:29456 run_id=slurm-7.0-* job='Slurm "
       "step 7.0' nproc=3 share=0/2 host token=slurm-secret"},
      {"sbatch on two nodes",
       {"--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "n9:1234", "--token-file", "tok"},
       "- nnodes=2 node_rank=1(given) endpoint=n9:1234 nproc=2 joining token=file"},
      {"sbatch bad SLURM_NNODES",
       {"--nnodes", "1"},
       "- nnodes=1 node_rank=0 nproc=2 single token=random"},
      {"mpirun",
       {"--token-file", "tok"},
       "openmpi nnodes=3 node_rank=1(given) nproc=1 joining token=file endpoint-over-mpi"},
      {"mpirun",
       {"--nnodes", "2", "--token-file", "tok"},
       "error: --nnodes 2 needs --rdzv-endpoint host:port (node 0's address)"},
      {"mpirun bad size",
       {"--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "n9:1234", "--token-file", "tok"},
       "- nnodes=2 node_rank=1(given) endpoint=n9:1234 nproc=1 joining token=file"},
      {"mpirun two slots on a machine",
       {"--token-file", "tok", "--rdzv-endpoint", "n9:1234"},
       "openmpi nnodes=4 node_rank=3(given) endpoint=n9:1234 nproc=1 share=1/2 joining token=file"},
      {"PyTorchJob master",
       {"--token-file", "tok"},
       "- nnodes=2 node_rank=0(given) endpoint=job-master-0:23456 nproc=1 host token=file "
       "no-lookup note='Kubeflow: dlaunch's coordinator listens on the rendezvous endpoint "
       "job-master-0:23456 (PET_MASTER_PORT), so the ranks' MASTER_PORT is another port of node 0, "
       "free at the start, where rank 0's TCPStore listens'"},
      {"PyTorchJob worker",
       {"--token-file", "tok", "--master-port", "23456"},
       "error: --master-port 23456 is the port of the rendezvous endpoint job-master-0:23456, "
       "where node 0's coordinator listens: give the ranks another one, or leave it out for a free "
       "one"},
      {"PyTorchJob worker", {"--nnodes", "1"}, "error: --node-rank must be in [0, 1)"},
      {"elastic PyTorchJob",
       {"--token-file", "tok"},
       "- nnodes=1:4 node_rank=0 endpoint=job-c10d:29400 run_id=job-42 nproc=1 elected token=file "
       "no-lookup"},
      {"PyTorchJob inside an sbatch script",
       {"--token-file", "tok"},
       "- nnodes=2 node_rank=1(given) endpoint=job-master-0:23456 nproc=2 joining token=file "
       "no-lookup note='Kubeflow: dlaunch's coordinator listens on the rendezvous endpoint "
       "job-master-0:23456 (PET_MASTER_PORT), so the ranks' MASTER_PORT is another port of node 0, "
       "free at the start, where rank 0's TCPStore listens'"},
      {"PyTorchJob bad PET_NNODES",
       {"--nnodes", "1"},
       "- nnodes=1 node_rank=0(given) endpoint=job-master-0:23456 nproc=1 single token=random "
       "master_port=23456(endpoint) master_addr_if_local=job-master-0"},
      {"DLAUNCH_JOB_TOKEN only",
       {"--nnodes", "2"},
       "error: --nnodes 2 needs --rdzv-endpoint host:port (node 0's address)"},
      {"DLAUNCH_JOB_TOKEN only",
       {"--nnodes", "2", "--rdzv-endpoint", "n9:1234"},
       "- nnodes=2 node_rank=0 endpoint=n9:1234 nproc=1 elected token=variable"},
      {"short DLAUNCH_JOB_TOKEN", {"--nnodes", "2", "--rdzv-endpoint", "n9:1234"}, kNoToken},
      {"none", {"--nnodes", "2", "--rdzv-endpoint", "n9:1234"}, kNoToken},
      {"none",
       {"--nnodes", "2", "--rdzv-endpoint", "n9:1234", "--token-file", "tok"},
       "- nnodes=2 node_rank=0 endpoint=n9:1234 nproc=1 elected token=file"},
      {"none",
       {"--nnodes", "2", "--rdzv-endpoint", "n9:1234", "--token-file", "tok", "--tls-cert", "c"},
       "error: TLS needs all of --tls-cert, --tls-key and --tls-ca"},
      {"none",
       {"--nnodes", "2", "--rdzv-endpoint", "n9:1234", "--token-file", "tok", "--master-port",
        "1234"},
       "error: --master-port 1234 is the port of the rendezvous endpoint n9:1234, where node 0's "
       "coordinator listens: give the ranks another one, or leave it out for a free one"},
      {"none", {"--tls-cert", "c"}, "error: --tls-* options are for multi-node launches"},
      {"none",
       {"--rdzv-endpoint", "localhost:29512"},
       "- nnodes=1 node_rank=0 endpoint=localhost:29512 nproc=1 single token=random "
       "master_port=29512(endpoint) master_addr_if_local=localhost"},
      {"none",
       {"--rdzv-endpoint", "localhost:29512", "--master-port", "29600", "--master-addr",
        "127.0.0.1"},
       "- nnodes=1 node_rank=0 endpoint=localhost:29512 nproc=1 single token=random "
       "master_port=29600"},
  };
  return kCases;
}

TEST(ResolveLaunchTest, EveryEnvironmentAndCommandLineResolvesAsTabled) {
  std::set<std::string> fixtures;
  std::set<std::string> errors;
  for (const Case& c : Cases()) {
    std::string line;
    for (const std::string& a : c.args) line += " " + a;
    EXPECT_EQ(Resolve(c.fixture, c.args), c.expect) << c.fixture << " with" << line;
    fixtures.insert(c.fixture);
    if (c.expect.rfind("error: ", 0) == 0) errors.insert(c.expect);
    // One line each: a message a user reads at once, not a dump.
    EXPECT_EQ(c.expect.find('\n'), std::string::npos) << c.fixture;
  }
  EXPECT_EQ(fixtures.size(), cluster::EnvFixtures().size()) << "a fixture never resolved";
  EXPECT_GE(fixtures.size(), 30u);
  // Not one catch-all: the conflicts and malformed variables each say what they are.
  EXPECT_GE(errors.size(), 25u);
}

TEST(ResolveLaunchTest, IsPureAndLeavesTheParsedOptionsAlone) {
  const cluster::EnvMap& env = Env("srun task 1");
  const LaunchOptions parsed = ParseCommandLine({"prog"}, env);
  const LaunchConfig a = ResolveLaunch(parsed, env, "x");
  const LaunchConfig b = ResolveLaunch(parsed, env, "x");
  EXPECT_EQ(Line(a), Line(b));
  EXPECT_EQ(a.options.run_id, "slurm-7.0-x");
  EXPECT_EQ(parsed.nnodes, 1);
  EXPECT_TRUE(parsed.run_id.empty());
  // The process environment plays no part: only `env` does.
  EXPECT_EQ(Line(ResolveLaunch(parsed, {}, "x")),
            "- nnodes=1 node_rank=0 nproc=1 single token=random");
}

// One node with torchrun's --rdzv-endpoint: the ranks' MASTER_ADDR/PORT come from it, unless
// --master-addr/--master-port say otherwise; a host of another machine leaves MASTER_ADDR alone.
TEST(ResolveNodeSetupTest, OneNodesEndpointIsTheRanksMaster) {
  auto setup = [](std::vector<std::string> args) {
    args.push_back("prog");
    return ResolveNodeSetup(ResolveLaunch(ParseCommandLine(args, {}), {}, "x"), {});
  };
  const NodeSetup local = setup({"--rdzv_endpoint", "localhost:29512"});
  EXPECT_EQ(local.master_addr, "localhost");
  EXPECT_TRUE(local.notes.empty());
  EXPECT_EQ(local.role, NodeRoleKind::kSingleNode);
  EXPECT_EQ(local.token.size(), 32u);

  EXPECT_EQ(setup({"--rdzv-endpoint", "localhost:29512", "--master-addr", "127.0.0.1"}).master_addr,
            "");
  const NodeSetup remote = setup({"--rdzv-endpoint", "192.0.2.1:29512"});
  EXPECT_EQ(remote.master_addr, "");
  ASSERT_EQ(remote.notes.size(), 1u);
  EXPECT_NE(remote.notes[0].find("is not this machine"), std::string::npos) << remote.notes[0];

  // A port something listens on cannot be rank 0's store: refused, naming the endpoint.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  try {
    setup({"--rdzv-endpoint", "localhost:" + std::to_string(ntohs(addr.sin_port))});
    ADD_FAILURE() << "a busy endpoint port was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the port is in use"), std::string::npos) << e.what();
  }
  ::close(listener);
}

}  // namespace
}  // namespace dlaunch::launcher
