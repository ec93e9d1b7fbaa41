#include "launcher/job/node_env.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace dlaunch::launcher
