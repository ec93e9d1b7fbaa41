#include "launcher/python/python_launch.h"

#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "core/base/files.h"
#include "core/error.h"
#include "core/run_dir/paths.h"
#include "launcher/doctor/python_probe.h"
#include "launcher/launch_checks.h"
#include "launcher/python/agent_files.h"
#include "launcher/python/torch_flight.h"

namespace dlaunch::launcher::python {
namespace {

namespace fs = std::filesystem;

// torchrun's --run-path: the file runs through runpy in the interpreter, whatever its name.
constexpr const char* kRunPathLauncher =
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')";

bool IsSet(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

// Other interpreters on this machine that have torch, for the fix of a refused torch script.
std::string InterpretersWithTorch(const std::string& refused) {
  std::vector<std::string> candidates;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      if (!dir.empty()) candidates.push_back(dir + "/python3");
    }
  }
  candidates.push_back("/usr/bin/python3");
  std::vector<std::string> found;
  for (const std::string& c : candidates) {
    std::error_code ec;
    const std::string canonical = fs::weakly_canonical(c, ec).string();
    if (::access(c.c_str(), X_OK) != 0 || c == refused) continue;
    bool seen = false;
    for (const std::string& f : found) seen = seen || fs::weakly_canonical(f, ec) == canonical;
    if (!seen && PythonHasModule(c, "torch")) found.push_back(c);
    if (found.size() == 2) break;
  }
  std::string out;
  for (const std::string& f : found) out += (out.empty() ? "" : " or ") + ("--python " + f);
  return out;
}

}  // namespace

Interpreter ResolveInterpreter(const LaunchOptions& o) {
  Interpreter in;
  std::string wanted = "python3";
  in.source = "PATH";
  if (!o.python.empty()) {
    wanted = o.python;
    in.source = "--python";
  } else if (IsSet("PYTHON_EXEC")) {
    wanted = std::getenv("PYTHON_EXEC");
    in.source = "PYTHON_EXEC";
  }
  try {
    in.path = ResolveProgram(wanted);
  } catch (const UsageError& e) {
    throw UsageError("Python interpreter from " + in.source + ": " + e.what());
  }
  return in;
}

void CheckInterpreterRuns(const Interpreter& interpreter) {
  // -I: the user's PYTHONPATH or a broken site-packages fail the ranks too, but with Python's
  // own traceback there; this asks only whether the file is a Python 3 at all.
  const CapturedRun run =
      RunCaptured({interpreter.path, "-I", "-c", "import sys; print(sys.version_info[0])"},
                  kInterpreterProbeTimeout);
  // The answer is the last line: a working Python may warn on stderr first (the same pipe).
  const std::string& out = run.out;
  const bool three =
      out == "3\n" || (out.size() > 2 && out.compare(out.size() - 3, 3, "\n3\n") == 0);
  if (run.exit_code == 0 && three) return;
  const std::string what =
      "Python interpreter " + interpreter.path + " (from " + interpreter.source + ")";
  if (run.timed_out) {
    throw UsageError(what + " did not answer within " +
                     std::to_string(kInterpreterProbeTimeout.count()) + " s");
  }
  std::string said = out.substr(0, out.find('\n'));
  if (said.size() > 120) said = said.substr(0, 120) + "...";
  if (run.exit_code == 0) {
    throw UsageError(what + " is not Python 3 (it answered '" + said + "')");
  }
  throw UsageError(what + " does not run Python: -c 'import sys' " +
                   (run.exit_code >= 0 ? "exited with " + std::to_string(run.exit_code)
                                       : std::string("was killed")) +
                   (said.empty() ? "" : " (" + said + ")"));
}

bool ImportsTorch(const std::string& script, const std::string& interpreter) {
  // Most scripts never name torch: they cost no interpreter run.
  std::string text;
  base::ReadFileBounded(script, size_t{64} << 20, &text);  // a longer script: its first 64 MiB
  if (text.find("torch") == std::string::npos) return false;
  // The interpreter parses the script as it will run it (its own grammar, any layout) and looks
  // for torch in import statements and in importlib.import_module / __import__ calls with a
  // literal name. An import inside a try that catches ImportError is optional, not needed. Exit
  // 0: imports torch; 3: does not; anything else (a syntax error): left to the rank to report.
  static const char* kProbe = R"(import ast, sys
tree = ast.parse(open(sys.argv[1], 'rb').read())
CATCH = ('ImportError', 'ModuleNotFoundError', 'Exception', 'BaseException')
def torch(name):
    return isinstance(name, str) and name.split('.')[0] == 'torch'
def catches_import_error(handler):
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return handler.type is None or any(getattr(k, 'id', '') in CATCH for k in kinds)
optional = set()
for n in ast.walk(tree):
    if isinstance(n, ast.Try) and any(map(catches_import_error, n.handlers)):
        optional.update(id(m) for b in n.body for m in ast.walk(b))
def needs(n):
    if isinstance(n, ast.Import):
        return any(torch(a.name) for a in n.names)
    if isinstance(n, ast.ImportFrom):
        return not n.level and torch(n.module)
    if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant):
        f = n.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, 'id', '')
        return name in ('import_module', '__import__') and torch(n.args[0].value)
    return False
sys.exit(0 if any(needs(n) for n in ast.walk(tree) if id(n) not in optional) else 3)
)";
  return RunCaptured({interpreter, "-I", "-c", kProbe, script}, std::chrono::seconds(20))
             .exit_code == 0;
}

std::vector<std::string> PythonArgv(const LaunchOptions& o, const Interpreter& interpreter) {
  const std::string& target = o.program.front();
  std::vector<std::string> argv = {interpreter.path, "-u"};
  if (o.module) {
    argv.insert(argv.end(), {"-m", target});
  } else {
    if (::access(target.c_str(), R_OK) != 0) {
      throw UsageError("script '" + target + "' does not exist or is not readable");
    }
    if (!fs::is_directory(target) && ImportsTorch(target, interpreter.path) &&
        !PythonHasModule(interpreter.path, "torch")) {
      const std::string others = InterpretersWithTorch(interpreter.path);
      throw UsageError(
          target + " imports torch, but " + interpreter.path + " (the interpreter from " +
          interpreter.source + ") cannot import it. Fix: " +
          (others.empty()
               ? "install torch for that interpreter, or "
                 "pass --python PATH (or set PYTHON_EXEC) to one that has it"
               : "use " + others + " (it has torch), or install torch for " + interpreter.path));
    }
    if (o.run_path) {
      argv.insert(argv.end(), {"-c", kRunPathLauncher});
    }
    argv.push_back(target);
  }
  argv.insert(argv.end(), o.program.begin() + 1, o.program.end());
  return argv;
}

std::string FindAgentDir(const std::string& self_exe) {
  if (IsSet("DLAUNCH_PYTHON_AGENT_DIR")) return std::getenv("DLAUNCH_PYTHON_AGENT_DIR");
  const fs::path bin = fs::path(self_exe).parent_path();
  for (const fs::path& dir : {bin.parent_path() / "share" / "dlaunch" / "python", bin / "python",
                              bin.parent_path() / "python"}) {
    std::error_code ec;
    if (fs::exists(dir / "sitecustomize.py", ec) && fs::is_directory(dir / "dlaunch", ec)) {
      return fs::absolute(dir, ec).string();
    }
  }
  return "";
}

void AddJobEnv(const std::string& agent_dir, bool agent,
               const std::map<std::string, std::string>& launcher_env,
               std::map<std::string, std::string>* env) {
  auto inherited = [&](const char* key) -> std::string {
    auto it = launcher_env.find(key);
    return it == launcher_env.end() ? "" : it->second;
  };
  auto set_default = [&](const char* key, const std::string& value) {
    if (inherited(key).empty() && !env->count(key)) (*env)[key] = value;
  };
  set_default("PYTHONUNBUFFERED", "1");
  if (!agent_dir.empty()) {
    (*env)["PYTHONPATH"] = inherited("PYTHONPATH");
    PutAgentFirst(agent_dir, env);
  }
  // Opted out: `import dlaunch` still works (its calls do nothing); the agent does not start.
  if (!agent) (*env)["DLAUNCH_PYTHON_AGENT"] = "0";
  // torch >= 2.2 keeps a ring of its NCCL calls and dumps it when its watchdog times out; the
  // dumps land in the rank directory (AddRankEnv). The ring's size has two names: torch 2.2-2.6
  // read TORCH_NCCL_TRACE_BUFFER_SIZE only, newer ones TORCH_FR_BUFFER_SIZE first and warn on
  // every rank when the old name is set at all. Unless the user set either, both are set, and
  // DLAUNCH_TORCH_ENV_DEFAULTS tells the Python agent that the old one is dlaunch's: on a torch
  // that reads the new name it unsets the old one before torch reads it
  // (python/dlaunch/_torch_env.py). Without the agent the old name stays, and torch warns.
  if (inherited("TORCH_NCCL_TRACE_BUFFER_SIZE").empty() &&
      inherited("TORCH_FR_BUFFER_SIZE").empty() && !env->count("TORCH_NCCL_TRACE_BUFFER_SIZE") &&
      !env->count("TORCH_FR_BUFFER_SIZE")) {
    (*env)["TORCH_FR_BUFFER_SIZE"] = "2000";
    (*env)["TORCH_NCCL_TRACE_BUFFER_SIZE"] = "2000";
    (*env)["DLAUNCH_TORCH_ENV_DEFAULTS"] = "TORCH_NCCL_TRACE_BUFFER_SIZE";
  }
  set_default("TORCH_NCCL_DUMP_ON_TIMEOUT", "1");
}

void PutAgentFirst(const std::string& agent_dir, std::map<std::string, std::string>* env) {
  if (agent_dir.empty()) return;
  std::string& path = (*env)["PYTHONPATH"];
  if (path == agent_dir || path.rfind(agent_dir + ":", 0) == 0) return;
  path = agent_dir + (path.empty() ? "" : ":" + path);
}

void AddRankEnv(const std::string& rank_dir, const std::map<std::string, std::string>& launcher_env,
                std::map<std::string, std::string>* env) {
  std::error_code ec;
  const rundir::RankDir dir(fs::absolute(rank_dir, ec).lexically_normal().string());
  (*env)["TORCHELASTIC_ERROR_FILE"] = dir.torch_error();
  // torch >= 2.5 reads TORCH_FR_DUMP_TEMP_FILE first, older ones only the NCCL name: the user's
  // choice of either stays, else both point into the rank directory.
  auto user_set = [&](const char* key) {
    auto it = launcher_env.find(key);
    return it != launcher_env.end() && !it->second.empty();
  };
  if (!user_set("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") && !user_set("TORCH_FR_DUMP_TEMP_FILE")) {
    (*env)["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] = dir.torch_trace_prefix();
    (*env)["TORCH_FR_DUMP_TEMP_FILE"] = dir.torch_trace_prefix();
  }
}

void ClearAttemptFiles(const std::string& rank_dir) {
  std::error_code ec;
  fs::remove(rundir::RankDir(rank_dir).torch_error(), ec);
  for (const std::string& dump : FindTorchFlightDumps(rank_dir)) fs::remove(dump, ec);
  ClearAgentFiles(rank_dir);
}

}  // namespace dlaunch::launcher::python
