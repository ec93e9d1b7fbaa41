#include "launcher/job/node_env.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/error.h"

namespace dlaunch::launcher {
namespace {

using Hosts = std::vector<std::string>;

TEST(SlurmNodelistTest, ExpandsRangesListsAndPadding) {
  EXPECT_EQ(ExpandSlurmNodelist("gpu[01-04,07],cpu9"),
            (Hosts{"gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "cpu9"}));
  EXPECT_EQ(ExpandSlurmNodelist("node1"), Hosts{"node1"});
  EXPECT_EQ(ExpandSlurmNodelist("a[08-11]-ib"), (Hosts{"a08-ib", "a09-ib", "a10-ib", "a11-ib"}));
  EXPECT_EQ(ExpandSlurmNodelist("x[1,3],y[2-3]"), (Hosts{"x1", "x3", "y2", "y3"}));
}

TEST(SlurmNodelistTest, MalformedListsAreUsageErrors) {
  for (const char* bad : {"gpu[01-", "gpu[3-1]", "gpu[a-b]", "", "a,,b", "gpu]"}) {
    EXPECT_THROW(ExpandSlurmNodelist(bad), UsageError) << bad;
  }
}

TEST(SchedulerEnvTest, SlurmGivesNodesCoordinatorAndRunId) {
  LaunchOptions o;
  auto engine = ApplySchedulerEnv({{"SLURM_STEP_NUM_TASKS", "4"},
                                   {"SLURM_PROCID", "2"},
                                   {"SLURM_STEP_ID", "0"},
                                   {"SLURM_STEP_NODELIST", "gpu[01-04]"},
                                   {"SLURM_JOB_ID", "1234"}},
                                  &o);
  EXPECT_EQ(engine, "slurm");
  EXPECT_EQ(o.nnodes, 4);
  EXPECT_EQ(o.node_rank, 2);
  EXPECT_EQ(o.rdzv_endpoint, "gpu01:30272");  // 29400 + (1234 % 375) * 8
  EXPECT_EQ(o.run_id.rfind("slurm-1234.0-", 0), 0u) << o.run_id;
}

TEST(SchedulerEnvTest, OpenMpiAndKubeflow) {
  LaunchOptions m;
  EXPECT_EQ(ApplySchedulerEnv({{"OMPI_COMM_WORLD_SIZE", "3"}, {"OMPI_COMM_WORLD_RANK", "1"}}, &m),
            "openmpi");
  EXPECT_EQ(m.nnodes, 3);
  EXPECT_EQ(m.node_rank, 1);
  EXPECT_TRUE(m.rdzv_endpoint.empty());
  LaunchOptions k;
  EXPECT_EQ(ApplySchedulerEnv({{"PET_NNODES", "2"},
                               {"PET_NODE_RANK", "1"},
                               {"MASTER_ADDR", "job-master-0"},
                               {"MASTER_PORT", "23456"}},
                              &k),
            "kubeflow");
  EXPECT_EQ(k.rdzv_endpoint, "job-master-0:23456");
}

TEST(SchedulerEnvTest, CommandLineWinsAndBadValuesAreErrors) {
  LaunchOptions o;
  o.nnodes_given = true;
  o.nnodes = 1;
  EXPECT_EQ(ApplySchedulerEnv(
                {{"SLURM_NNODES", "4"}, {"SLURM_NODEID", "0"}, {"SLURM_JOB_NODELIST", "a"}}, &o),
            "");
  EXPECT_EQ(o.nnodes, 1);
  LaunchOptions bad;
  EXPECT_THROW(
      ApplySchedulerEnv({{"OMPI_COMM_WORLD_SIZE", "two"}, {"OMPI_COMM_WORLD_RANK", "0"}}, &bad),
      UsageError);
}

// One node with torchrun's --rdzv-endpoint: the ranks' MASTER_ADDR/PORT come from it, unless
// --master-addr/--master-port say otherwise; a host of another machine leaves MASTER_ADDR alone.
TEST(SingleNodeEndpointTest, EndpointIsTheRanksMaster) {
  LaunchOptions o = ParseCommandLine({"--rdzv_endpoint", "localhost:29512", "prog"}, {});
  ApplySingleNodeEndpoint(&o);
  EXPECT_EQ(o.master_addr, "localhost");
  EXPECT_EQ(o.master_port, 29512);
  EXPECT_TRUE(o.notes.empty());

  LaunchOptions given = ParseCommandLine({"--rdzv-endpoint", "localhost:29512", "--master-port",
                                          "29600", "--master-addr", "127.0.0.1", "prog"},
                                         {});
  ApplySingleNodeEndpoint(&given);
  EXPECT_EQ(given.master_addr, "127.0.0.1");
  EXPECT_EQ(given.master_port, 29600);

  LaunchOptions remote = ParseCommandLine({"--rdzv-endpoint", "192.0.2.1:29512", "prog"}, {});
  ApplySingleNodeEndpoint(&remote);
  EXPECT_EQ(remote.master_addr, "127.0.0.1");
  EXPECT_EQ(remote.master_port, 29512);
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
  LaunchOptions busy = ParseCommandLine(
      {"--rdzv-endpoint", "localhost:" + std::to_string(ntohs(addr.sin_port)), "prog"}, {});
  try {
    ApplySingleNodeEndpoint(&busy);
    ADD_FAILURE() << "a busy endpoint port was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the port is in use"), std::string::npos) << e.what();
  }
  ::close(listener);

  // A malformed endpoint is refused when parsed, before anything uses it.
  EXPECT_THROW(ParseCommandLine({"--rdzv-endpoint", "nocolon", "prog"}, {}), UsageError);
  // Many nodes: the endpoint is the coordinator's, not the ranks'.
  LaunchOptions multi = ParseCommandLine(
      {"--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "localhost:29512", "prog"}, {});
  ApplySingleNodeEndpoint(&multi);
  EXPECT_EQ(multi.master_port, 0);
}

}  // namespace
}  // namespace dlaunch::launcher
