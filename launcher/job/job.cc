#include "launcher/job/job.h"

#include "launcher/builtins.h"
#include "launcher/job/cluster_env.h"
#include "launcher/job/job_agent.h"
#include "launcher/job/job_plan.h"
#include "launcher/job/node_env.h"
#include "launcher/job/node_roles.h"
#include "launcher/job/rank_program.h"
#include "launcher/python/python_launch.h"

namespace dlaunch::launcher {

int RunJob(const LaunchOptions& options, const std::string& self_exe) {
  // Everything that can be wrong with the input fails here, before any rank.
  LaunchOptions o = options;
  std::vector<std::string> argv = RankArgv(o, self_exe);
  NodeSetup setup = ResolveNodeSetup(&o);
  auto placement = PlaceRanks(o, CurrentEnv());
  const std::string host = Hostname();
  std::unique_ptr<NodeRole> role = MakeNodeRole(o, &setup, host);
  const bool builtin = o.command == Command::kTrain || o.command == Command::kPreflight;
  if (builtin && !o.skip_doctor) CheckDoctorBeforeStart();

  CheckFileDescriptorLimit(o.nproc);
  ApplyRunDirMode(o.run_dir_mode);
  const JobIdentity identity = role->Prepare();
  JobPlan plan = CreateRunDirectories(
      JobPlan(o, setup, identity, std::move(argv), CurrentEnv(), python::FindAgentDir(self_exe)));
  auto spawner = MakeForkExecSpawner();
  return JobAgent(std::move(plan), role.get(), host, std::move(placement)).Run(spawner.get());
}

}  // namespace dlaunch::launcher
