// The engine detectors, table-driven: every fixture's environment gives exactly its place, each
// engine's Detect claims only its own environments, and the Slurm lists expand as Slurm does.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "launcher/cluster/detect_cluster.h"
#include "launcher/cluster/kubeflow.h"
#include "launcher/cluster/openmpi.h"
#include "launcher/cluster/slurm.h"
#include "launcher/cluster/slurm_lists.h"
#include "tests/cluster/cluster_fixtures.h"

namespace dlaunch::launcher::cluster {
namespace {

TEST(DetectClusterTest, EveryFixtureGivesItsPlace) {
  ASSERT_GE(EnvFixtures().size(), 30u);
  std::set<std::string> names;
  for (const EnvFixture& f : EnvFixtures()) {
    EXPECT_TRUE(names.insert(f.name).second) << "two fixtures named " << f.name;
    EXPECT_EQ(FormatPlace(DetectCluster(f.env)), f.expect) << f.name;
  }
}

// Each engine's Detect claims exactly the fixtures DetectCluster gives to it, or, for the
// engines DetectCluster tries later, a fixture an earlier engine took.
TEST(DetectClusterTest, EachDetectorClaimsItsOwnEnvironments) {
  for (const EnvFixture& f : EnvFixtures()) {
    const Engine engine = DetectCluster(f.env).engine;
    // In DetectCluster's order.
    const std::vector<std::pair<Engine, bool>> claims = {
        {Engine::kSlurmStep, DetectSlurmStep(f.env).has_value()},
        {Engine::kKubeflow, DetectKubeflow(f.env).has_value()},
        {Engine::kSlurmBatch, DetectSlurmBatch(f.env).has_value()},
        {Engine::kOpenMpi, DetectOpenMpi(f.env).has_value()}};
    bool taken = false;  // by an engine tried earlier
    for (const auto& [detector, claimed] : claims) {
      if (detector == engine) {
        EXPECT_TRUE(claimed) << f.name;
        taken = true;
      } else {
        EXPECT_TRUE(!claimed || taken) << f.name << ": claimed by a later engine";
      }
    }
  }
  // An srun step beside PET_NNODES is the step's; PET_NNODES beside a batch script or mpirun
  // stands for --nnodes, which sets those aside.
  EXPECT_EQ(DetectCluster({{"PET_NNODES", "2"}, {"SLURM_JOB_ID", "8"}}).engine, Engine::kKubeflow);
  EXPECT_EQ(DetectCluster(
                {{"PET_NNODES", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}})
                .engine,
            Engine::kKubeflow);
  EXPECT_EQ(DetectCluster({{"PET_NNODES", "2"},
                           {"SLURM_STEP_ID", "0"},
                           {"SLURM_STEP_NUM_TASKS", "2"},
                           {"SLURM_PROCID", "0"}})
                .engine,
            Engine::kSlurmStep);
}

TEST(DetectClusterTest, MalformedFieldsThrowTheirOneLineErrorOnlyWhenRead) {
  const ClusterPlace place =
      DetectCluster({{"OMPI_COMM_WORLD_SIZE", "two"}, {"OMPI_COMM_WORLD_RANK", "1"}});
  EXPECT_EQ(place.node_rank.Get(), 1);
  try {
    place.nnodes.Get();
    FAIL() << "a malformed OMPI_COMM_WORLD_SIZE was read";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "OMPI_COMM_WORLD_SIZE='two' is not an integer");
  }
  EXPECT_FALSE(place.endpoint.given());
  EXPECT_FALSE(place.share.given());
}

TEST(DetectClusterTest, EngineNamesAreTodaysMessages) {
  EXPECT_STREQ(EngineName(Engine::kSlurmStep), "slurm");
  EXPECT_STREQ(EngineName(Engine::kSlurmBatch), "slurm");
  EXPECT_STREQ(EngineName(Engine::kOpenMpi), "openmpi");
  EXPECT_STREQ(EngineName(Engine::kKubeflow), "kubeflow");
  EXPECT_STREQ(EngineName(Engine::kNone), "");
}

TEST(SlurmListsTest, NodelistsExpandAsSlurmDoes) {
  using Hosts = std::vector<std::string>;
  EXPECT_EQ(ExpandSlurmNodelist("gpu[01-04,07],cpu9"),
            (Hosts{"gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "cpu9"}));
  EXPECT_EQ(ExpandSlurmNodelist("a[08-11]-ib"), (Hosts{"a08-ib", "a09-ib", "a10-ib", "a11-ib"}));
  EXPECT_EQ(ExpandSlurmNodelist("x[1,3],y[2-3]"), (Hosts{"x1", "x3", "y2", "y3"}));
  for (const char* bad : {"gpu[01-", "gpu[3-1]", "gpu[a-b]", "", "a,,b", "gpu]", "a[1]b[2]"}) {
    EXPECT_THROW(ExpandSlurmNodelist(bad), UsageError) << bad;
  }
  EXPECT_EQ(ExpandSlurmCounts("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  for (const char* bad : {"", "x", "2(x", "2(3)", "-1"}) {
    EXPECT_THROW(ExpandSlurmCounts(bad), UsageError) << bad;
  }
}

TEST(SlurmListsTest, NeighbouringJobsGetPortsOfTheirOwn) {
  std::set<int> ports;
  for (uint64_t job = 1000000; job < 1000000 + kSlurmPortJobs; ++job) {
    for (uint64_t step = 0; step < kSlurmPortSteps; ++step) {
      const int port = SlurmStepPort(job, step);
      EXPECT_GE(port, 29400);
      EXPECT_LT(port, 32768);
      EXPECT_TRUE(ports.insert(port).second) << "job " << job << " step " << step;
    }
  }
}

}  // namespace
}  // namespace dlaunch::launcher::cluster
