#include "tests/cluster/cluster_fixtures.h"

namespace dlaunch::launcher::cluster {
namespace {

// `srun -N1 -n2` on one host, as slurm-wlm 22.05 sets it for task `procid`.
EnvMap SrunTask(int procid, EnvMap extra = {}) {
  EnvMap env = {{"SLURM_JOB_ID", "7"},
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
  for (auto& [k, v] : extra) env[k] = v;
  return env;
}

EnvMap Without(EnvMap env, const char* key) {
  env.erase(key);
  return env;
}

// Task 3 of `srun -N2 --ntasks-per-node=2`, step 2 of job 7, on gpu04.
EnvMap TwoNodeTask(EnvMap extra = {}) {
  return SrunTask(3, [&] {
    EnvMap e = {{"SLURM_STEP_ID", "2"},
                {"SLURM_STEP_NUM_TASKS", "4"},
                {"SLURM_STEP_NODELIST", "gpu[03-04]"},
                {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                {"SLURM_NODEID", "1"},
                {"SLURM_LOCALID", "1"}};
    for (auto& [k, v] : extra) e[k] = v;
    return e;
  }());
}

// An sbatch --ntasks=2 script on one node.
EnvMap Batch(EnvMap extra = {}) {
  EnvMap env = {{"SLURM_JOB_ID", "8"},         {"SLURM_NNODES", "1"},
                {"SLURM_NODEID", "0"},         {"SLURM_JOB_NODELIST", "localhost"},
                {"SLURM_TASKS_PER_NODE", "2"}, {"SLURM_PROCID", "0"}};
  for (auto& [k, v] : extra) env[k] = v;
  return env;
}

EnvMap Mpirun(const std::string& size, const std::string& rank, EnvMap extra = {}) {
  EnvMap env = {{"OMPI_COMM_WORLD_SIZE", size}, {"OMPI_COMM_WORLD_RANK", rank}};
  for (auto& [k, v] : extra) env[k] = v;
  return env;
}

// A PyTorchJob pod of two replicas, as training-operator v1.7 sets it.
EnvMap Pod(const std::string& rank, EnvMap extra = {}) {
  EnvMap env = {{"PET_NNODES", "2"},
                {"PET_NODE_RANK", rank},
                {"PET_MASTER_ADDR", "job-master-0"},
                {"PET_MASTER_PORT", "23456"},
                {"MASTER_ADDR", "job-master-0"},
                {"MASTER_PORT", "23456"},
                {"WORLD_SIZE", "2"},
                {"RANK", rank}};
  for (auto& [k, v] : extra) env[k] = v;
  return env;
}

const std::string kStep7 =
    "endpoint=localhost:29456[SLURM_STEP_NODELIST, SLURM_JOB_ID, SLURM_STEP_ID] "
    "run_id=slurm-7.0-*[SLURM_JOB_ID, SLURM_STEP_ID] job='Slurm step 7.0'";
const std::string kStepToken = " token=slurm-step-secret[SLURM_JOB_ID, SLURM_STEP_ID]";
const std::string kShare = "[SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE]";
const std::string kTwoNode =
    "slurm-step nnodes=4[SLURM_STEP_NUM_TASKS] node_rank=3[SLURM_PROCID] endpoint=gpu03:";
const std::string kStep72 = " run_id=slurm-7.2-*[SLURM_JOB_ID, SLURM_STEP_ID] job='Slurm step 7.2'";
const std::string kMaster = " endpoint=job-master-0:23456[PET_MASTER_ADDR/PET_MASTER_PORT]";

std::vector<EnvFixture> SlurmStepFixtures() {
  const std::string two = "slurm-step nnodes=2[SLURM_STEP_NUM_TASKS] ";
  return {
      {"srun task 0", SrunTask(0),
       two + "node_rank=0[SLURM_PROCID] " + kStep7 + " share=0/2" + kShare + kStepToken},
      {"srun task 1", SrunTask(1),
       two + "node_rank=1[SLURM_PROCID] " + kStep7 + " share=1/2" + kShare + kStepToken},
      {"srun two nodes", TwoNodeTask(),
       kTwoNode + "29458[SLURM_STEP_NODELIST, SLURM_JOB_ID, SLURM_STEP_ID]" + kStep72 +
           " share=1/2" + kShare + kStepToken},
      {"srun DLAUNCH_RDZV_PORT", TwoNodeTask({{"DLAUNCH_RDZV_PORT", "5000"}}),
       kTwoNode + "5000[SLURM_STEP_NODELIST, DLAUNCH_RDZV_PORT]" + kStep72 + " share=1/2" + kShare +
           kStepToken},
      {"srun GPUs on node", SrunTask(0, {{"SLURM_GPUS_ON_NODE", "8"}}),
       two + "node_rank=0[SLURM_PROCID] " + kStep7 + " nproc=4[SLURM_GPUS_ON_NODE] share=0/2" +
           kShare + kStepToken},
      {"srun GPUs per task",
       SrunTask(0, {{"SLURM_GPUS_ON_NODE", "8"}, {"SLURM_GPUS_PER_TASK", "a100:2"}}),
       two + "node_rank=0[SLURM_PROCID] " + kStep7 + " nproc=2[SLURM_GPUS_PER_TASK] share=0/2" +
           kShare + kStepToken},
      {"srun job node list only",
       SrunTask(1, {{"SLURM_STEP_NODELIST", ""}, {"SLURM_JOB_NODELIST", "n[1-2]"}}),
       two +
           "node_rank=1[SLURM_PROCID] endpoint=n1:29456[SLURM_JOB_NODELIST, SLURM_JOB_ID, "
           "SLURM_STEP_ID] run_id=slurm-7.0-*[SLURM_JOB_ID, SLURM_STEP_ID] job='Slurm step 7.0' "
           "share=1/2" +
           kShare + kStepToken},
      {"srun one task (srun --pty bash)",
       SrunTask(0, {{"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_STEP_TASKS_PER_NODE", "1"}}),
       "slurm-step nnodes=1[SLURM_STEP_NUM_TASKS] node_rank=0[SLURM_PROCID] " + kStep7 +
           " share=0/1" + kShare + kStepToken},
      {"srun with DLAUNCH_JOB_TOKEN", SrunTask(0, {{"DLAUNCH_JOB_TOKEN", "0123456789abcdef"}}),
       two + "node_rank=0[SLURM_PROCID] " + kStep7 + " share=0/2" + kShare +
           " token=job-token-variable[DLAUNCH_JOB_TOKEN]"},
      {"srun without SLURM_JOB_ID, own port",
       SrunTask(1, {{"SLURM_JOB_ID", ""}, {"DLAUNCH_RDZV_PORT", "6000"}}),
       two +
           "node_rank=1[SLURM_PROCID] endpoint=localhost:6000[SLURM_STEP_NODELIST, "
           "DLAUNCH_RDZV_PORT] share=1/2" +
           kShare + kStepToken},
  };
}

std::vector<EnvFixture> SlurmStepErrors() {
  const std::string two = "slurm-step nnodes=2[SLURM_STEP_NUM_TASKS] ";
  const std::string ids = "[SLURM_STEP_NODELIST, SLURM_JOB_ID, SLURM_STEP_ID]";
  const std::string tail = " run_id=slurm-7.0-*[SLURM_JOB_ID, SLURM_STEP_ID] job='Slurm step 7.0'";
  return {
      {"srun bad SLURM_PROCID", SrunTask(0, {{"SLURM_PROCID", "zero"}}),
       two + "node_rank=!SLURM_PROCID='zero' is not a non-negative integer[SLURM_PROCID] " +
           kStep7 + " share=0/2" + kShare + kStepToken},
      {"srun bad SLURM_STEP_NUM_TASKS", SrunTask(0, {{"SLURM_STEP_NUM_TASKS", "-2"}}),
       "slurm-step nnodes=!SLURM_STEP_NUM_TASKS='-2' is not a non-negative "
       "integer[SLURM_STEP_NUM_TASKS] node_rank=0[SLURM_PROCID] " +
           kStep7 + " share=0/2" + kShare + kStepToken},
      {"srun bad job id", SrunTask(0, {{"SLURM_JOB_ID", "8x"}}),
       two + "node_rank=0[SLURM_PROCID] endpoint=!SLURM_JOB_ID='8x' is not a Slurm id" + ids +
           " run_id=slurm-8x.0-*[SLURM_JOB_ID, SLURM_STEP_ID] job='Slurm step 8x.0' share=0/2" +
           kShare + kStepToken},
      {"srun no node list", SrunTask(0, {{"SLURM_STEP_NODELIST", ""}, {"SLURM_JOB_NODELIST", ""}}),
       two +
           "node_rank=0[SLURM_PROCID] endpoint=!SLURM_STEP_NODELIST is not set: cannot find node 0 "
           "of the step[SLURM_JOB_NODELIST, SLURM_JOB_ID, SLURM_STEP_ID]" +
           tail + " share=0/2" + kShare + kStepToken},
      {"srun malformed node list", SrunTask(0, {{"SLURM_STEP_NODELIST", "gpu[3-1]"}}),
       two +
           "node_rank=0[SLURM_PROCID] endpoint=!malformed range '3-1' in Slurm node list "
           "'gpu[3-1]'" +
           ids + tail + " share=0/2" + kShare + kStepToken},
      {"srun node id past the task list",
       SrunTask(0, {{"SLURM_NODEID", "3"}, {"SLURM_GPUS_ON_NODE", "8"}}),
       two + "node_rank=0[SLURM_PROCID] " + kStep7 +
           " nproc=!SLURM_NODEID=3 but SLURM_STEP_TASKS_PER_NODE='2' lists 1 "
           "nodes[SLURM_GPUS_ON_NODE] share=!SLURM_NODEID=3 but SLURM_STEP_TASKS_PER_NODE='2' "
           "lists 1 nodes" +
           kShare + kStepToken},
      {"srun bad GPU count", SrunTask(0, {{"SLURM_GPUS_PER_TASK", "a100:two"}}),
       two + "node_rank=0[SLURM_PROCID] " + kStep7 +
           " nproc=!SLURM_GPUS_PER_TASK='two' is not a non-negative integer[SLURM_GPUS_PER_TASK] "
           "share=0/2" +
           kShare + kStepToken},
      // An unset id is refused as an empty one (it once escaped as std::out_of_range).
      {"srun without SLURM_JOB_ID", Without(SrunTask(1), "SLURM_JOB_ID"),
       two + "node_rank=1[SLURM_PROCID] endpoint=!SLURM_JOB_ID='' is not a Slurm id" + ids +
           " share=1/2" + kShare + kStepToken},
      {"srun task past the step's tasks", SrunTask(2, {{"SLURM_LOCALID", "0"}}),
       two + "node_rank=2[SLURM_PROCID] " + kStep7 + " share=0/2" + kShare + kStepToken},
      // A Slurm step beside PET_NNODES is the step's (PET_NNODES is the parser's --nnodes).
      {"srun beside PET_NNODES", SrunTask(1, {{"PET_NNODES", "3"}}),
       two + "node_rank=1[SLURM_PROCID] " + kStep7 + " share=1/2" + kShare + kStepToken},
  };
}

std::vector<EnvFixture> BatchAndMpiFixtures() {
  const std::string batch8 = " run_id=slurm-8-*[SLURM_JOB_ID]";
  const std::string local = "[OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE]";
  EnvMap in_allocation = {{"SLURM_JOB_ID", "9"},
                          {"SLURM_NNODES", "2"},
                          {"SLURM_JOB_NODELIST", "n[1-2]"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                          {"SLURM_GPUS_ON_NODE", "4"}};
  EnvMap remote = in_allocation;
  remote.insert({{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_PROCID", "0"}});
  return {
      {"sbatch one node", Batch(),
       "slurm-batch nnodes=1[SLURM_NNODES] node_rank=0[SLURM_NNODES]" + batch8 +
           " nproc=2[SLURM_TASKS_PER_NODE]"},
      {"sbatch GPUs on node", Batch({{"SLURM_GPUS_ON_NODE", "4"}}),
       "slurm-batch nnodes=1[SLURM_NNODES] node_rank=0[SLURM_NNODES]" + batch8 +
           " nproc=4[SLURM_GPUS_ON_NODE]"},
      {"sbatch SLURM_JOB_NUM_NODES", Batch({{"SLURM_NNODES", ""}, {"SLURM_JOB_NUM_NODES", "1"}}),
       "slurm-batch nnodes=1[SLURM_JOB_NUM_NODES] node_rank=0[SLURM_JOB_NUM_NODES]" + batch8 +
           " nproc=2[SLURM_TASKS_PER_NODE]"},
      {"sbatch no node count",
       {{"SLURM_JOB_ID", "8"}},
       "slurm-batch nnodes=1[SLURM_JOB_ID] node_rank=0[SLURM_JOB_ID]" + batch8},
      {"sbatch on two nodes", Batch({{"SLURM_NNODES", "2"}, {"SLURM_JOB_NODELIST", "n[1-2]"}}),
       "slurm-batch nnodes=!this Slurm job has 2 nodes but dlaunch runs in its batch script, on "
       "one "
       "of them: start it with `srun --ntasks-per-node=1 dlaunch ...` so every node runs "
       "one[SLURM_NNODES] node_rank=0[SLURM_NNODES]" +
           batch8 + " nproc=2[SLURM_TASKS_PER_NODE]"},
      {"sbatch bad SLURM_NNODES", Batch({{"SLURM_NNODES", "two"}}),
       "slurm-batch nnodes=!SLURM_NNODES='two' is not a non-negative integer[SLURM_NNODES] "
       "node_rank=0[SLURM_NNODES]" +
           batch8 + " nproc=2[SLURM_TASKS_PER_NODE]"},
      {"sbatch bad task counts", Batch({{"SLURM_TASKS_PER_NODE", "2(x"}}),
       "slurm-batch nnodes=1[SLURM_NNODES] node_rank=0[SLURM_NNODES]" + batch8 +
           " nproc=!malformed Slurm task count '2(x'[SLURM_TASKS_PER_NODE]"},
      {"mpirun", Mpirun("3", "1"),
       "openmpi nnodes=3[OMPI_COMM_WORLD_SIZE] node_rank=1[OMPI_COMM_WORLD_RANK]"},
      {"mpirun two slots on a machine",
       Mpirun("4", "3", {{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
       "openmpi nnodes=4[OMPI_COMM_WORLD_SIZE] node_rank=3[OMPI_COMM_WORLD_RANK] share=1/2" +
           local},
      {"mpirun in a Slurm allocation", Mpirun("2", "0", in_allocation),
       "openmpi nnodes=2[OMPI_COMM_WORLD_SIZE] node_rank=0[OMPI_COMM_WORLD_RANK] "
       "nproc=4[SLURM_GPUS_ON_NODE] share=0/1" +
           local},
      {"mpirun daemon's srun step", Mpirun("2", "1", remote),
       "openmpi nnodes=2[OMPI_COMM_WORLD_SIZE] node_rank=1[OMPI_COMM_WORLD_RANK] "
       "nproc=4[SLURM_GPUS_ON_NODE] share=0/1" +
           local},
      {"mpirun rank past its size", Mpirun("2", "5"),
       "openmpi nnodes=2[OMPI_COMM_WORLD_SIZE] node_rank=5[OMPI_COMM_WORLD_RANK]"},
      {"mpirun bad size", Mpirun("two", "0"),
       "openmpi nnodes=!OMPI_COMM_WORLD_SIZE='two' is not an integer[OMPI_COMM_WORLD_SIZE] "
       "node_rank=0[OMPI_COMM_WORLD_RANK]"},
      {"mpirun bad local rank",
       Mpirun("2", "0", {{"OMPI_COMM_WORLD_LOCAL_RANK", "x"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
       "openmpi nnodes=2[OMPI_COMM_WORLD_SIZE] node_rank=0[OMPI_COMM_WORLD_RANK] "
       "share=!OMPI_COMM_WORLD_LOCAL_RANK='x' is not a non-negative integer" +
           local},
      {"mpirun local rank past the local size",
       Mpirun("2", "0", {{"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
       "openmpi nnodes=2[OMPI_COMM_WORLD_SIZE] node_rank=0[OMPI_COMM_WORLD_RANK] share=0/1" +
           local},
  };
}

std::vector<EnvFixture> KubeflowAndPlainFixtures() {
  const std::string two = "kubeflow nnodes=2[PET_NNODES] ";
  return {
      {"PyTorchJob master", Pod("0"), two + "node_rank=0[PET_NODE_RANK]" + kMaster},
      {"PyTorchJob worker", Pod("1"), two + "node_rank=1[PET_NODE_RANK]" + kMaster},
      {"PyTorchJob of an older operator",
       Pod("1", {{"PET_MASTER_ADDR", ""}, {"PET_MASTER_PORT", ""}, {"MASTER_PORT", "1234"}}),
       two + "node_rank=1[PET_NODE_RANK] endpoint=job-master-0:1234[MASTER_ADDR/MASTER_PORT]"},
      {"elastic PyTorchJob",
       {{"PET_NNODES", "1:4"},
        {"PET_RDZV_ENDPOINT", "job-c10d:29400"},
        {"PET_RDZV_ID", "job-42"},
        {"PET_RDZV_BACKEND", "c10d"}},
       "kubeflow nnodes=1:4[PET_NNODES] endpoint=job-c10d:29400[PET_RDZV_ENDPOINT] "
       "run_id=job-42[PET_RDZV_ID]"},
      {"PyTorchJob IPv6 master", Pod("1", {{"PET_MASTER_ADDR", "fd00::1"}}),
       two +
           "node_rank=1[PET_NODE_RANK] endpoint=[fd00::1]:23456[PET_MASTER_ADDR/PET_MASTER_PORT]"},
      {"PyTorchJob bad PET_NNODES", Pod("0", {{"PET_NNODES", "many"}}),
       "kubeflow nnodes=!PET_NNODES: --nnodes must be N or MIN:MAX with 1 <= MIN <= MAX (got "
       "'many')[PET_NNODES] node_rank=0[PET_NODE_RANK]" +
           kMaster},
      {"PyTorchJob PET_NNODES MIN > MAX", Pod("0", {{"PET_NNODES", "3:1"}}),
       "kubeflow nnodes=!PET_NNODES: --nnodes 3:1: MIN must not be larger than MAX[PET_NNODES] "
       "node_rank=0[PET_NODE_RANK]" +
           kMaster},
      {"PyTorchJob empty PET_NNODES", Pod("0", {{"PET_NNODES", ""}}),
       "kubeflow nnodes=!PET_NNODES is set but empty: give it a value, or unset it[PET_NNODES] "
       "node_rank=0[PET_NODE_RANK]" +
           kMaster},
      {"PyTorchJob bad PET_NODE_RANK", Pod("one"),
       two +
           "node_rank=!PET_NODE_RANK: the argument ('one') for option '--node-rank' is "
           "invalid[PET_NODE_RANK]" +
           kMaster},
      {"PyTorchJob bad endpoint", Pod("0", {{"PET_RDZV_ENDPOINT", "a:b:c:1"}}),
       two + "node_rank=0[PET_NODE_RANK] endpoint=a:b:c:1[PET_RDZV_ENDPOINT]"},
      {"PyTorchJob node rank past its nodes", Pod("2"),
       two + "node_rank=2[PET_NODE_RANK]" + kMaster},
      // PET_NNODES stands for --nnodes, which sets a batch script's single node aside.
      {"PyTorchJob inside an sbatch script", Pod("1", Batch()),
       two + "node_rank=1[PET_NODE_RANK]" + kMaster + " nproc=2[SLURM_TASKS_PER_NODE]"},
      {"none", {}, "none"},
      {"plain torchrun variables",
       {{"MASTER_ADDR", "10.0.0.1"},
        {"MASTER_PORT", "29500"},
        {"WORLD_SIZE", "8"},
        {"RANK", "3"},
        {"LOCAL_RANK", "3"},
        {"GROUP_RANK", "0"},
        {"LOCAL_WORLD_SIZE", "8"}},
       "none"},
      {"torchrun option from PET_NPROC_PER_NODE only", {{"PET_NPROC_PER_NODE", "2"}}, "none"},
      {"DLAUNCH_JOB_TOKEN only",
       {{"DLAUNCH_JOB_TOKEN", "0123456789abcdef"}},
       "none token=job-token-variable[DLAUNCH_JOB_TOKEN]"},
      {"short DLAUNCH_JOB_TOKEN",
       {{"DLAUNCH_JOB_TOKEN", "0123456789"}},
       "none token=job-token-variable[DLAUNCH_JOB_TOKEN]"},
      {"empty Slurm variables", {{"SLURM_JOB_ID", ""}, {"SLURM_PROCID", "0"}}, "none"},
  };
}

}  // namespace

const std::vector<EnvFixture>& EnvFixtures() {
  static const std::vector<EnvFixture> kFixtures = [] {
    std::vector<EnvFixture> all;
    for (auto part : {SlurmStepFixtures(), SlurmStepErrors(), BatchAndMpiFixtures(),
                      KubeflowAndPlainFixtures()}) {
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }();
  return kFixtures;
}

}  // namespace dlaunch::launcher::cluster
