// How dlaunch runs Python ranks the way torchrun does: the interpreter (--python, PYTHON_EXEC,
// python3), `-u`, `-m module`, `--run-path`, the rank agent on PYTHONPATH, an absolute
// TORCHELASTIC_ERROR_FILE and PyTorch's own flight recorder pointed into the rank directory.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "launcher/cli/options.h"

namespace dlaunch::launcher::python {

struct Interpreter {
  std::string path;    // resolved, executable
  std::string source;  // "--python", "PYTHON_EXEC" or "PATH"
};

// --python, else $PYTHON_EXEC, else python3 from PATH. Throws UsageError naming where the missing
// interpreter came from.
Interpreter ResolveInterpreter(const LaunchOptions& o);

// Runs `interpreter` once on a one-line program that prints Python's major version: a
// --python /bin/false or a broken PYTHON_EXEC would otherwise fail in every rank after the start.
// Throws UsageError naming the interpreter and where it came from when it does not answer 3
// within kInterpreterProbeTimeout. Blocks for that run (tens of milliseconds for a working one).
inline constexpr std::chrono::seconds kInterpreterProbeTimeout{10};
void CheckInterpreterRuns(const Interpreter& interpreter);

// argv of each rank for a Python entry: interpreter, -u, then the script, `-m module` or the
// run-path launcher, then the user's arguments. Throws UsageError for a missing script, and for
// a script that imports torch when the interpreter cannot (with the fix). Blocks for one short
// interpreter run in that case (a module lookup, not an import of torch).
std::vector<std::string> PythonArgv(const LaunchOptions& o, const Interpreter& interpreter);

// Whether `script` needs torch, as `interpreter` parses it: an import statement of torch (any
// form: `import os, torch`, `from torch.nn import ...`, inside a function), or
// importlib.import_module("torch") / __import__("torch"), outside a try that catches
// ImportError. Blocks for one short interpreter run (no import of torch), and only when the
// script's text names torch at all; false when the interpreter cannot parse it.
bool ImportsTorch(const std::string& script, const std::string& interpreter);

// The rank agent's folder (holding sitecustomize.py and dlaunch/), found next to the binaries:
// $DLAUNCH_PYTHON_AGENT_DIR, <bin>/../share/dlaunch/python, <bin>/python, <bin>/../python.
// "" when there is none.
std::string FindAgentDir(const std::string& self_exe);

// Variables every program rank gets, each only where neither the user (`launcher_env`, dlaunch's
// own environment) nor the job has set it: PYTHONUNBUFFERED=1, the agent folder in front of
// PYTHONPATH (unless `agent_dir` is empty), DLAUNCH_PYTHON_AGENT=0 when `agent` is off
// (--no-python-agent), and PyTorch's flight recorder (TORCH_FR_BUFFER_SIZE and its older name
// TORCH_NCCL_TRACE_BUFFER_SIZE, both or neither, with DLAUNCH_TORCH_ENV_DEFAULTS naming the old
// one for the agent to drop on a torch that reads the new; TORCH_NCCL_DUMP_ON_TIMEOUT). Pure.
void AddJobEnv(const std::string& agent_dir, bool agent,
               const std::map<std::string, std::string>& launcher_env,
               std::map<std::string, std::string>* env);

// Puts `agent_dir` in front of env's PYTHONPATH unless it is first already: --env PYTHONPATH=...
// replaces the inherited path, never the agent's folder. Nothing when `agent_dir` is "". Pure.
void PutAgentFirst(const std::string& agent_dir, std::map<std::string, std::string>* env);

// Per-rank variables: an absolute TORCHELASTIC_ERROR_FILE (so `@record` still works after
// os.chdir(); DLAUNCH_RANK_DIR is the job plan's, for every kind of rank), and
// TORCH_NCCL_DEBUG_INFO_TEMP_FILE and TORCH_FR_DUMP_TEMP_FILE (torch >= 2.5's name) inside the
// rank directory unless `launcher_env` sets either. Pure.
void AddRankEnv(const std::string& rank_dir, const std::map<std::string, std::string>& launcher_env,
                std::map<std::string, std::string>* env);

// Removes what the Python side of an earlier attempt left in rank_dir: torch's error file (so a
// recorded error is this attempt's), torch's flight-recorder dumps, and the agent's heartbeat,
// stacks and flight tail. Never throws.
void ClearAttemptFiles(const std::string& rank_dir);

}  // namespace dlaunch::launcher::python
