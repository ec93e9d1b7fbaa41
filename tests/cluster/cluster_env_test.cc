// Slurm steps, Slurm's --nproc defaults, node shares and Kubeflow's PET_* variables, from made-up
// environments.
#include "launcher/job/cluster_env.h"

#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "launcher/job/node_env.h"

namespace dlaunch::launcher {
namespace {

// `srun -N1 -n2` on one host, as slurm-wlm 22.05 sets it for task `procid`.
EnvMap SrunTask(int procid) {
  return {{"SLURM_JOB_ID", "7"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_STEP_NUM_TASKS", "2"},
          {"SLURM_STEP_TASKS_PER_NODE", "2"},
          {"SLURM_STEP_NODELIST", "localhost"},
          {"SLURM_JOB_NODELIST", "localhost"},
          {"SLURM_NNODES", "1"},
          {"SLURM_NODEID", "0"},
          {"SLURM_NTASKS", "2"},
          {"SLURM_TASKS_PER_NODE", "2"},
          {"SLURM_PROCID", std::to_string(procid)},
          {"SLURM_LOCALID", std::to_string(procid)}};
}

TEST(SlurmStepTest, EveryTaskIsOneNodeOfOneJob) {
  for (int task : {0, 1}) {
    LaunchOptions o;
    EXPECT_EQ(ApplySchedulerEnv(SrunTask(task), &o), "slurm");
    EXPECT_EQ(o.nnodes, 2);
    EXPECT_EQ(o.node_rank, task);
    EXPECT_EQ(o.rdzv_endpoint, "localhost:29456");  // 29400 + 7 * 8 + 0
    EXPECT_EQ(o.job_id, "Slurm step 7.0");
    EXPECT_EQ(o.run_id.rfind("slurm-7.0-", 0), 0u) << o.run_id;
    EXPECT_EQ(o.nproc, 1);  // no GPUs, no --nproc: one rank per task
  }
}

TEST(SlurmStepTest, JobsThatShareANodeGetPortsOfTheirOwn) {
  // Partial-node jobs run side by side: any two of 375 neighbouring job ids, with up to 8 steps
  // each, take different ports, all between torchrun's 29400 and the ephemeral ports.
  std::set<int> ports;
  for (uint64_t job = 1000000; job < 1000000 + kSlurmPortJobs; ++job) {
    for (uint64_t step = 0; step < kSlurmPortSteps; ++step) {
      const int port = SlurmStepPort(job, step);
      EXPECT_GE(port, 29400);
      EXPECT_LT(port, 32768);
      EXPECT_TRUE(ports.insert(port).second) << "job " << job << " step " << step;
    }
  }
  // Two tasks of one step, two srun steps of neighbouring jobs on one host:
  EnvMap first = SrunTask(0), second = SrunTask(1), other = SrunTask(0);
  other["SLURM_JOB_ID"] = "8";
  LaunchOptions a, b, c;
  ApplySchedulerEnv(first, &a);
  ApplySchedulerEnv(second, &b);
  ApplySchedulerEnv(other, &c);
  EXPECT_EQ(a.rdzv_endpoint, b.rdzv_endpoint);
  EXPECT_NE(a.rdzv_endpoint, c.rdzv_endpoint);
  EXPECT_EQ(c.job_id, "Slurm step 8.0");
  other["SLURM_JOB_ID"] = "8x";
  LaunchOptions d;
  EXPECT_THROW(ApplySchedulerEnv(other, &d), UsageError);
}

TEST(SlurmStepTest, StepsOnSeveralNodesMeetOnTheStepsFirstHostPerStepPort) {
  EnvMap env = SrunTask(3);
  env["SLURM_STEP_ID"] = "2";
  env["SLURM_STEP_NUM_TASKS"] = "4";
  env["SLURM_STEP_NODELIST"] = "gpu[03-04]";
  env["SLURM_STEP_TASKS_PER_NODE"] = "2(x2)";
  env["SLURM_NODEID"] = "1";
  env["SLURM_LOCALID"] = "1";
  LaunchOptions o;
  ApplySchedulerEnv(env, &o);
  EXPECT_EQ(o.nnodes, 4);
  EXPECT_EQ(o.node_rank, 3);
  EXPECT_EQ(o.rdzv_endpoint, "gpu03:29458");  // 29400 + 7 * 8 + 2
  EXPECT_EQ(o.run_id.rfind("slurm-7.2-", 0), 0u) << o.run_id;
  EXPECT_EQ(AgentShareOfNode(env).index, 1);
  EXPECT_EQ(AgentShareOfNode(env).count, 2);
  env["DLAUNCH_RDZV_PORT"] = "5000";
  LaunchOptions p;
  ApplySchedulerEnv(env, &p);
  EXPECT_EQ(p.rdzv_endpoint, "gpu03:5000");
}

TEST(SlurmStepTest, ANnodesThatSplitsTheStepIntoSeveralJobsIsRefused) {
  LaunchOptions o;
  o.nnodes = 1;
  o.nnodes_given = true;
  try {
    ApplySchedulerEnv(SrunTask(1), &o);
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--nnodes 1 but this Slurm step runs 2 dlaunch tasks"),
              std::string::npos)
        << e.what();
  }
  // An interactive `srun --pty bash`: one task, the user's own multi-node command line.
  EnvMap shell = SrunTask(0);
  shell["SLURM_STEP_NUM_TASKS"] = "1";
  LaunchOptions manual;
  manual.nnodes = 2;
  manual.nnodes_given = true;
  manual.node_rank = 1;
  manual.rdzv_endpoint = "n0:1234";
  EXPECT_EQ(ApplySchedulerEnv(shell, &manual), "");
  EXPECT_EQ(manual.node_rank, 1);
  EXPECT_EQ(manual.rdzv_endpoint, "n0:1234");
  LaunchOptions same;
  same.nnodes = 2;
  same.nnodes_given = true;
  EXPECT_EQ(ApplySchedulerEnv(SrunTask(1), &same), "slurm");
  EXPECT_EQ(same.node_rank, 1);
}

TEST(SlurmNprocTest, GpusPerTaskThenGpusOnNodeThenBatchTasks) {
  EnvMap step = SrunTask(0);
  step["SLURM_GPUS_ON_NODE"] = "8";
  LaunchOptions a;
  ApplySlurmNprocDefault(step, &a);
  EXPECT_EQ(a.nproc, 4);  // 8 GPUs, 2 dlaunch tasks on the node
  step["SLURM_GPUS_PER_TASK"] = "a100:2";
  LaunchOptions b;
  ApplySlurmNprocDefault(step, &b);
  EXPECT_EQ(b.nproc, 2);
  LaunchOptions given;
  given.nproc = 3;
  given.nproc_given = true;
  ApplySlurmNprocDefault(step, &given);
  EXPECT_EQ(given.nproc, 3);

  // A batch script (no step) on one node of an sbatch --ntasks=2 job: one dlaunch, two ranks.
  EnvMap batch = {{"SLURM_JOB_ID", "8"},         {"SLURM_NNODES", "1"},
                  {"SLURM_NODEID", "0"},         {"SLURM_JOB_NODELIST", "localhost"},
                  {"SLURM_TASKS_PER_NODE", "2"}, {"SLURM_PROCID", "0"}};
  LaunchOptions c;
  EXPECT_EQ(ApplySchedulerEnv(batch, &c), "slurm");
  EXPECT_EQ(c.nproc, 2);
  EXPECT_EQ(c.nnodes, 1);
  EXPECT_EQ(c.run_id.rfind("slurm-8-", 0), 0u) << c.run_id;
  batch["SLURM_GPUS_ON_NODE"] = "4";
  LaunchOptions d;
  ApplySlurmNprocDefault(batch, &d);
  EXPECT_EQ(d.nproc, 4);
  LaunchOptions outside;
  ApplySlurmNprocDefault({{"SLURM_TASKS_PER_NODE", "5"}}, &outside);
  EXPECT_EQ(outside.nproc, 1);
}

TEST(SlurmNprocTest, CountsAndBadValues) {
  EXPECT_EQ(ExpandSlurmCounts("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(ExpandSlurmCounts("4"), std::vector<int>{4});
  for (const char* bad : {"", "x", "2(x", "2(3)", "-1"}) {
    EXPECT_THROW(ExpandSlurmCounts(bad), UsageError) << bad;
  }
  EnvMap env = SrunTask(0);
  env["SLURM_PROCID"] = "zero";
  LaunchOptions o;
  EXPECT_THROW(ApplySchedulerEnv(env, &o), UsageError);
}

TEST(SlurmBatchTest, ABatchScriptOnSeveralNodesIsRefused) {
  EnvMap batch = {{"SLURM_JOB_ID", "9"},
                  {"SLURM_NNODES", "2"},
                  {"SLURM_JOB_NODELIST", "n[1-2]"},
                  {"SLURM_PROCID", "0"},
                  {"SLURM_NODEID", "0"}};
  LaunchOptions o;
  try {
    ApplySchedulerEnv(batch, &o);
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("srun --ntasks-per-node=1"), std::string::npos)
        << e.what();
  }
  LaunchOptions given;  // the user's own multi-node command line
  given.nnodes = 2;
  given.nnodes_given = true;
  EXPECT_EQ(ApplySchedulerEnv(batch, &given), "");
}

TEST(SlurmBatchTest, MpirunInsideAnAllocationIsMpirunsJob) {
  // The launcher on the first node inherits the batch script's variables; on the others, those
  // of the srun that started mpirun's daemons.
  EnvMap local = {{"SLURM_JOB_ID", "9"},
                  {"SLURM_NNODES", "2"},
                  {"SLURM_JOB_NODELIST", "n[1-2]"},
                  {"OMPI_COMM_WORLD_SIZE", "2"},
                  {"OMPI_COMM_WORLD_RANK", "0"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                  {"SLURM_GPUS_ON_NODE", "4"}};
  LaunchOptions a;
  EXPECT_EQ(ApplySchedulerEnv(local, &a), "openmpi");
  EXPECT_EQ(a.nnodes, 2);
  EXPECT_EQ(a.nproc, 4);
  EnvMap remote = local;
  remote.insert({{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_PROCID", "0"}});
  remote["OMPI_COMM_WORLD_RANK"] = "1";
  LaunchOptions b;
  EXPECT_EQ(ApplySchedulerEnv(remote, &b), "openmpi");
  EXPECT_EQ(b.node_rank, 1);
}

TEST(NodeShareTest, OpenMpiLocalRanksAndAlone) {
  NodeShare m =
      AgentShareOfNode({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(m.index, 1);
  EXPECT_EQ(m.count, 2);
  NodeShare alone = AgentShareOfNode({});
  EXPECT_EQ(alone.index, 0);
  EXPECT_EQ(alone.count, 1);
}

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
  EXPECT_EQ(o.numa_binding, "node");
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
  EXPECT_EQ(d.gpu_binding, "local-rank");
  EXPECT_EQ(d.numa_binding, "");
  LaunchOptions o =
      ParseCommandLine({"--gpu-binding", "isolate", "--numa_binding", "socket", "prog"}, {});
  EXPECT_EQ(o.gpu_binding, "isolate");
  EXPECT_EQ(o.numa_binding, "socket");
  EXPECT_EQ(ParseCommandLine({"--numa-binding", "none", "prog"}, {}).numa_binding, "");
  EXPECT_THROW(ParseCommandLine({"--gpu-binding", "all", "prog"}, {}), UsageError);
  EXPECT_EQ(ParseCommandLine({"--numa-binding", "core-complex", "prog"}, {}).numa_binding,
            "core-complex");  // torchrun 2.15's
  EXPECT_THROW(ParseCommandLine({"--numa-binding", "l3", "prog"}, {}), UsageError);
}

}  // namespace
}  // namespace dlaunch::launcher
