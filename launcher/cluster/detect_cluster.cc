#include "launcher/cluster/detect_cluster.h"

#include "launcher/cluster/env_values.h"
#include "launcher/cluster/kubeflow.h"
#include "launcher/cluster/openmpi.h"
#include "launcher/cluster/slurm.h"

namespace dlaunch::launcher::cluster {

ClusterPlace DetectCluster(const EnvMap& env) {
  std::optional<ClusterPlace> found = DetectSlurmStep(env);
  if (!found) found = DetectKubeflow(env);
  if (!found) found = DetectSlurmBatch(env);
  if (!found) found = DetectOpenMpi(env);
  ClusterPlace place = found.value_or(ClusterPlace{});
  // mpirun's local rank also splits a machine among launchers that no engine above placed.
  if (!place.share.given()) place.share = OpenMpiShare(env);
  // Under mpirun in an allocation too, Slurm's GPUs say how many ranks each launcher runs.
  place.nproc = SlurmNproc(env, place.share);
  if (Find(env, "DLAUNCH_JOB_TOKEN")) {
    place.token = Sourced<TokenSource>::Of(TokenSource::kJobTokenVariable, "DLAUNCH_JOB_TOKEN");
  }
  return place;
}

}  // namespace dlaunch::launcher::cluster
