#include "launcher/program/plain_program.h"

#include "launcher/launch_checks.h"
#include "launcher/python/python_launch.h"

namespace dlaunch::launcher {

PlainProgram::PlainProgram(LaunchOptions options, std::string agent_dir)
    : options_(std::move(options)), agent_dir_(std::move(agent_dir)) {}

std::vector<std::string> PlainProgram::ResolveArgv() const {
  std::vector<std::string> argv = options_.program;
  argv[0] = ResolveProgram(argv[0]);
  return argv;
}

void PlainProgram::AddJobDefaults(const Env& launcher_env, Env* env) const {
  python::AddJobEnv(agent_dir_, options_.python_agent, launcher_env, env);
}

void PlainProgram::AddJobOverrides(Env* env) const { python::PutAgentFirst(agent_dir_, env); }

void PlainProgram::AddRankEnv(const std::string& rank_dir, const Env& launcher_env,
                              Env* env) const {
  python::AddRankEnv(rank_dir, launcher_env, env);
}

void PlainProgram::BeforeAttempt(const std::string& rank_dir) const {
  python::ClearAttemptFiles(rank_dir);
}

void PlainProgram::ShapeProcess(ProcessSpec* process) const {
  process->agent_pipe = options_.python_agent;
}

}  // namespace dlaunch::launcher
