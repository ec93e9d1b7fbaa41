// Kubeflow's PET_* variables, from made-up environments (Slurm's and mpirun's places are
// resolve_launch_test.cc's).
#include "launcher/job/cluster_env.h"

#include <gtest/gtest.h>

#include <set>

#include "core/error.h"

namespace dlaunch::launcher {
namespace {

// Kubeflow's PyTorchJob: every torchrun option from PET_<OPTION>; the command line wins.
TEST(KubeflowTest, EveryPetVariableSetsItsOption) {
  const EnvMap env = {{"PET_NPROC_PER_NODE", "3"},
                      {"PET_NNODES", "2"},
                      {"PET_NODE_RANK", "1"},
                      {"PET_RDZV_BACKEND", "c10d"},
                      {"PET_RDZV_ENDPOINT", "m0:29400"},
                      {"PET_RDZV_ID", "job-42"},
                      {"PET_MAX_RESTARTS", "3"},
                      {"PET_MONITOR_INTERVAL", "0.5"},
                      {"PET_LOG_DIR", "/tmp/logs"},
                      {"PET_LOCAL_RANKS_FILTER", "0"},
                      {"PET_NO_PYTHON", "1"},
                      {"PET_STANDALONE", "0"},
                      {"PET_REDIRECTS", "3"},
                      {"PET_TEE", "3"},
                      {"PET_NUMA_BINDING", "node"},
                      {"PET_ROLE", "trainer"},
                      {"PET_START_METHOD", "spawn"},
                      {"PET_LOCAL_ADDR", "10.0.0.7"},
                      {"PET_SHUTDOWN_TIMEOUT", "9"},
                      {"PET_VIRTUAL_LOCAL_RANK", "1"},
                      {"PET_LOG_LINE_PREFIX_TEMPLATE", "${rank}: "},
                      {"PET_DUPLICATE_STDOUT_FILTERS", "loss"},
                      {"PET_EVENT_LOG_HANDLER", "null"},
                      {"PET_SIGNALS_TO_HANDLE", "SIGTERM,SIGUSR1"}};
  LaunchOptions o = ParseCommandLine({"prog"}, env);
  EXPECT_EQ(o.local_addr, "10.0.0.7");
  EXPECT_EQ(o.grace_period, std::chrono::seconds(9));
  EXPECT_TRUE(o.virtual_local_rank);
  EXPECT_EQ(o.log_line_prefix_template, "${rank}: ");
  EXPECT_EQ(o.stdout_filters, std::vector<std::string>{"loss"});
  EXPECT_EQ(o.signals_to_handle.size(), 2u);
  EXPECT_EQ(o.redirects.For(0), 3);
  EXPECT_EQ(o.tee.For(0), 3);
  EXPECT_EQ(o.role, "trainer");
  EXPECT_EQ(o.nproc, 3);
  EXPECT_TRUE(o.nproc_given);
  EXPECT_EQ(o.nnodes, 2);
  EXPECT_EQ(o.node_rank, 1);
  EXPECT_EQ(o.rdzv_endpoint, "m0:29400");
  EXPECT_EQ(o.run_id, "job-42");
  EXPECT_EQ(o.max_restarts, 3);
  EXPECT_EQ(o.log_dir, "/tmp/logs");
  EXPECT_EQ(o.local_ranks_filter, std::vector<int>{0});  // torchrun's: by local rank
  EXPECT_TRUE(o.no_python);
  EXPECT_EQ(o.numa_binding, NumaBinding::kNode);
}

TEST(KubeflowTest, CommandLineWinsOverEveryAlias) {
  const EnvMap env = {{"PET_NPROC_PER_NODE", "3"}, {"PET_NNODES", "2"},
                      {"PET_NODE_RANK", "1"},      {"PET_MAX_RESTARTS", "3"},
                      {"PET_RDZV_ID", "from-env"}, {"PET_MODULE", "1"}};
  LaunchOptions o = ParseCommandLine({"--nproc", "5", "--nnodes=1", "--max_restarts", "0",
                                      "--run-id", "cli", "--node-rank", "0", "prog"},
                                     env);
  EXPECT_EQ(o.nproc, 5);
  EXPECT_EQ(o.nnodes, 1);
  EXPECT_EQ(o.node_rank, 0);
  EXPECT_EQ(o.max_restarts, 0);
  EXPECT_EQ(o.run_id, "cli");
  EXPECT_TRUE(o.module);  // not on the command line: PET_MODULE=1 applies
}

TEST(KubeflowTest, MasterAddressIsTheRendezvousEndpoint) {
  LaunchOptions pet = ParseCommandLine(
      {"prog"},
      {{"PET_NNODES", "2"}, {"PET_MASTER_ADDR", "job-master-0"}, {"PET_MASTER_PORT", "23456"}});
  EXPECT_EQ(pet.rdzv_endpoint, "job-master-0:23456");
  LaunchOptions plain = ParseCommandLine(
      {"prog"}, {{"PET_NNODES", "2"}, {"MASTER_ADDR", "job-master-0"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(plain.rdzv_endpoint, "job-master-0:1234");
  LaunchOptions cli =
      ParseCommandLine({"--rdzv-endpoint", "a:1", "prog"},
                       {{"PET_NNODES", "2"}, {"PET_MASTER_ADDR", "b"}, {"PET_MASTER_PORT", "2"}});
  EXPECT_EQ(cli.rdzv_endpoint, "a:1");
  // MASTER_ADDR alone, outside a PyTorchJob, is some other tool's.
  EXPECT_EQ(ParseCommandLine({"prog"}, {{"MASTER_ADDR", "x"}, {"MASTER_PORT", "1"}}).rdzv_endpoint,
            "");
}

// Every bad value names its variable, not the option it stands for (#28: PET_NPROC_PER_NODE=abc
// was "--nproc must be ...").
TEST(KubeflowTest, BadValuesNameTheVariable) {
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"PET_NNODES", "many"},
                                                        {"PET_NNODES", "3:1"},
                                                        {"PET_NPROC_PER_NODE", "0"},
                                                        {"PET_NPROC_PER_NODE", "abc"},
                                                        {"PET_STANDALONE", "yes"},
                                                        {"PET_RDZV_BACKEND", "etcd"},
                                                        {"PET_RDZV_CONF", "bogus=1"},
                                                        {"PET_START_METHOD", "thread"},
                                                        {"PET_LOCAL_RANKS_FILTER", "x"},
                                                        {"PET_MAX_RESTARTS", "-1"},
                                                        {"PET_TEE", "9"},
                                                        {"PET_SHUTDOWN_TIMEOUT", "soon"},
                                                        {"PET_EVENT_LOG_HANDLER", "console"},
                                                        {"PET_MONITOR_INTERVAL", "-1"}}) {
    try {
      ParseCommandLine({"prog"}, {{key, value}});
      ADD_FAILURE() << key << "=" << value << " accepted";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(key, 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace dlaunch::launcher

namespace dlaunch::launcher {
namespace {

TEST(PlacementOptionsTest, ModesAndBadValues) {
  LaunchOptions d = ParseCommandLine({"prog"}, {});
  EXPECT_EQ(d.gpu_binding, GpuBinding::kLocalRank);
  EXPECT_EQ(d.numa_binding, NumaBinding::kNone);
  LaunchOptions o =
      ParseCommandLine({"--gpu-binding", "isolate", "--numa_binding", "socket", "prog"}, {});
  EXPECT_EQ(o.gpu_binding, GpuBinding::kIsolate);
  EXPECT_EQ(o.numa_binding, NumaBinding::kSocket);
  EXPECT_EQ(ParseCommandLine({"--numa-binding", "none", "prog"}, {}).numa_binding,
            NumaBinding::kNone);
  EXPECT_THROW(ParseCommandLine({"--gpu-binding", "all", "prog"}, {}), UsageError);
  EXPECT_EQ(ParseCommandLine({"--numa-binding", "core-complex", "prog"}, {}).numa_binding,
            NumaBinding::kCoreComplex);  // torchrun 2.15's
  EXPECT_THROW(ParseCommandLine({"--numa-binding", "l3", "prog"}, {}), UsageError);
}

}  // namespace
}  // namespace dlaunch::launcher
