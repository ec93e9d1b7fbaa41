#include "launcher/program/plain_program.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "core/error.h"
#include "launcher/launch_checks.h"
#include "launcher/python/python_launch.h"

namespace dlaunch::launcher {

std::string ResolveProgram(const std::string& program) {
  auto check = [&](const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return false;
    if (S_ISDIR(st.st_mode)) throw UsageError("program '" + path + "' is a directory");
    if (::access(path.c_str(), X_OK) != 0) {
      throw UsageError("program '" + path +
                       "' is not executable (chmod +x, or run it with an "
                       "interpreter: dlaunch ... -- python3 " +
                       path + ")");
    }
    // execve would fail with ENOEXEC after the run directory exists: neither ELF nor "#!".
    char head[4] = {};
    std::ifstream(path, std::ios::binary).read(head, sizeof(head));
    if (std::string(head, 4) !=
            "\x7f"
            "ELF" &&
        std::string(head, 2) != "#!") {
      throw UsageError("program '" + path + "' is neither a binary nor a script with a #! line");
    }
    CheckShebang(path);  // a missing interpreter fails execve in every rank, after the start
    return true;
  };
  if (program.find('/') != std::string::npos) {
    if (!check(program)) throw UsageError("program '" + program + "' does not exist");
    return program;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), F_OK) == 0 && check(candidate)) return candidate;
    start = end + 1;
  }
  throw UsageError("program '" + program + "' not found in PATH");
}

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
