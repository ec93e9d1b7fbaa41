// Any program the user names (`dlaunch -- ./prog`, `dlaunch -- python3 t.py`): run as found.
#pragma once

#include <string>
#include <vector>

#include "launcher/cli/options.h"
#include "launcher/program/rank_program.h"

namespace dlaunch::launcher {

// A plain program may itself be Python (`python3 t.py`, a script with a #! line): its ranks get
// the rank agent's variables, so the agent loads where it can, but no agent is expected of them.
class PlainProgram : public RankProgram {
 public:
  // `agent_dir`: the Python rank agent's folder ("" = none found).
  PlainProgram(LaunchOptions options, std::string agent_dir);

  // The program as found (ResolveProgram), with the user's arguments. Throws UsageError. Blocks
  // for reading the program's first bytes.
  std::vector<std::string> ResolveArgv() const override;
  // PYTHONUNBUFFERED, the agent first on PYTHONPATH, --no-python-agent, PyTorch's flight
  // recorder (python::AddJobEnv). Pure.
  void AddJobDefaults(const Env& launcher_env, Env* env) const override;
  void AddJobOverrides(Env* env) const override;
  // TORCHELASTIC_ERROR_FILE and torch's dump files in the rank folder (python::AddRankEnv).
  void AddRankEnv(const std::string& rank_dir, const Env& launcher_env, Env* env) const override;
  // Removes an earlier attempt's torch error file, torch dumps and agent files. Never throws.
  void BeforeAttempt(const std::string& rank_dir) const override;
  // The agent's pipe, unless --no-python-agent: a Python rank's heartbeats must not depend on
  // the disk (its agent's fallback).
  void ShapeProcess(ProcessSpec* process) const override;

 protected:
  const LaunchOptions& options() const { return options_; }
  const std::string& agent_dir() const { return agent_dir_; }

 private:
  LaunchOptions options_;
  std::string agent_dir_;
};

}  // namespace dlaunch::launcher
