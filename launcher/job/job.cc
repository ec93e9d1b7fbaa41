#include "launcher/job/job.h"

#include <iostream>

#include "core/base/environ.h"
#include "core/base/proc.h"
#include "core/exit_codes.h"
#include "launcher/job/cluster_env.h"
#include "launcher/job/job_agent.h"
#include "launcher/job/job_plan.h"
#include "launcher/job/launch_config.h"
#include "launcher/job/node_env.h"
#include "launcher/job/node_roles.h"
#include "launcher/program/rank_program.h"

namespace dlaunch::launcher {

int RunJob(const LaunchOptions& options, const std::string& self_exe) {
  // Everything that can be wrong with the input fails here, before any rank; the user's program
  // first, whose error is the one to fix.
  const std::shared_ptr<const RankProgram> program =
      MakeRankProgram(options, FindProgramSite(self_exe));
  if (program->PrintHelp()) return kExitOk;
  std::vector<std::string> argv = program->ResolveArgv();
  const EnvMap env = base::CurrentEnv();
  const LaunchConfig config = ResolveLaunch(options, env, NewRunId());
  const LaunchOptions& o = config.options;
  NodeSetup setup = ResolveNodeSetup(config, env);
  auto placement = PlaceRanks(o, config.share, env);
  const std::string host = base::Hostname();
  std::unique_ptr<NodeRole> role = MakeNodeRole(o, &setup, host);
  program->CheckBeforeStart();

  CheckFileDescriptorLimit(o.nproc);
  // The input is all checked: what was accepted but does nothing here is said once.
  for (const std::string& note : o.notes) std::cerr << "dlaunch: " << note << std::endl;
  for (const std::string& note : setup.notes) std::cerr << "dlaunch: " << note << std::endl;
  ApplyRunDirMode(o.run_dir_mode);
  // From here until the first attempt starts, SIGTERM or SIGINT ends every wait at once (the
  // node rendezvous may wait minutes for nodes): exit code 128+n and a summary, as in an attempt.
  InterruptWatch watch([&role](int signal) { role->Interrupt(signal); });
  const JobIdentity identity = role->Prepare();
  if (const auto& ended = role->ended()) {
    // A late node of a job that is over, or a node interrupted before it knew its run directory
    // or node rank: nowhere of its own to write a summary.
    if (!ended->result.interrupted_by || identity.run_id.empty() ||
        identity.membership.node_rank < 0) {
      return ended->exit_code;
    }
  }
  JobPlan plan = CreateRunDirectories(
      JobPlan(o, setup, identity, std::move(argv), base::CurrentEnv(), program));
  auto spawner = MakeForkExecSpawner();
  return JobAgent(std::move(plan), role.get(), host, std::move(placement))
      .Run(spawner.get(), &watch);
}

}  // namespace dlaunch::launcher
