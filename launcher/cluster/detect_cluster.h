// Which engine started dlaunch, and this node's place in its job: one Detect per engine
// (slurm.h, openmpi.h, kubeflow.h), tried in the order dlaunch has always applied them.
#pragma once

#include "launcher/cluster/cluster_place.h"

namespace dlaunch::launcher::cluster {

// The place `env` describes: a Slurm step first (it names the node even against a command line's
// --nnodes), then a PyTorchJob (its PET_NNODES stands for --nnodes, which sets every other engine
// aside), a Slurm batch script, mpirun; else Engine::kNone. Whatever the engine, this launcher's
// share of the machine (a step's SLURM_LOCALID, else mpirun's local rank), Slurm's ranks per node
// wherever SLURM_JOB_ID is set, and DLAUNCH_JOB_TOKEN before a step's derived token. Pure; a
// malformed variable is an error of its field (Sourced::Get), never thrown here.
ClusterPlace DetectCluster(const EnvMap& env);

}  // namespace dlaunch::launcher::cluster
