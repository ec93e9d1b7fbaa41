// Where this node sits in a cluster, as the engine that started dlaunch tells it: a value read
// from the environment once, with the variable each field came from, for the step that weighs it
// against the command line (ResolveLaunch). Nothing here reads the process environment, the
// clock or the file system, and nothing includes launcher/job/.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "core/error.h"

namespace dlaunch::launcher::cluster {

using EnvMap = std::map<std::string, std::string>;

enum class Engine {
  kNone,        // no engine's variables: the command line alone decides
  kSlurmStep,   // inside `srun`: each task is one node agent of one job
  kSlurmBatch,  // an sbatch script (a Slurm job, no step): dlaunch runs once, on one node
  kOpenMpi,     // mpirun: one launcher per slot; node 0's address is agreed over MPI later
  kKubeflow,    // a PyTorchJob pod: PET_NNODES, PET_NODE_RANK and the master's address
};

// The engine's name as today's messages give it ("(from slurm)"): slurm, openmpi, kubeflow, "".
const char* EngineName(Engine engine);

// A value the environment gives, and the variables it came from. A variable that is there but
// malformed leaves `error` (the one-line UsageError text), thrown only by Get(): a value the
// command line overrides is never an error, as with `--nproc 2` under a bad SLURM_GPUS_ON_NODE.
template <typename T>
struct Sourced {
  std::optional<T> value;
  std::string source;  // "SLURM_PROCID", "SLURM_STEP_NODELIST, DLAUNCH_RDZV_PORT"
  std::string error;

  bool given() const { return value.has_value() || !error.empty(); }
  // The value; throws UsageError(error) for a malformed one. Precondition: given().
  const T& Get() const {
    if (!error.empty()) throw UsageError(error);
    return *value;
  }
  static Sourced Of(T v, std::string from) { return {std::move(v), std::move(from), ""}; }
  static Sourced Bad(std::string from, std::string why) {
    return {std::nullopt, std::move(from), std::move(why)};
  }
};

// Which of the node agents on this machine this one is (several under `srun -n2` on one node, or
// mpirun with two slots): index and count, {0, 1} when alone.
struct NodeShare {
  int index = 0;
  int count = 1;
};

// Where a multi-node job's shared token comes from when no --token-file is given.
enum class TokenSource {
  kNone,              // nowhere: a multi-node launch needs --token-file
  kJobTokenVariable,  // DLAUNCH_JOB_TOKEN, exported before the engine started the launchers
  kSlurmStepSecret,   // derived per step from $HOME/.dlaunch/job-secret (job/slurm_token.h)
};

struct ClusterPlace {
  Engine engine = Engine::kNone;
  Sourced<int> nnodes;            // MAX of an elastic MIN:MAX
  int min_nodes = 0;              // MIN of Kubeflow's PET_NNODES=MIN:MAX; 0: as nnodes
  Sourced<int> node_rank;         // absent: the coordinator ranks nodes in join order
  Sourced<std::string> endpoint;  // host:port of node 0's coordinator, as the variables spell it
  Sourced<std::string> run_id;
  bool run_id_is_stem = false;  // Slurm's: the launcher appends -<time>-<random> (NewRunId), so
                                // a second dlaunch in one step gets a run directory of its own
  std::string job_id;           // the scheduler's name of the job: "Slurm step 7.0"
  Sourced<int> nproc;           // ranks per node where the command line gives none
  Sourced<NodeShare> share;     // absent: alone on the machine
  Sourced<TokenSource> token;
};

// One line naming every field the environment gave, its value (or `!error`) and its variables:
// `slurm-step nnodes=4[SLURM_STEP_NUM_TASKS] node_rank=2[SLURM_PROCID] ...`. For tests and
// messages. Pure.
std::string FormatPlace(const ClusterPlace& place);

}  // namespace dlaunch::launcher::cluster
