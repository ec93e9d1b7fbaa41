// A Python entry: `dlaunch train.py`, `-m module`, `--run-path file`. dlaunch picks the
// interpreter (--python, PYTHON_EXEC, python3) and runs it as torchrun does, and every rank is
// expected to load the rank agent.
#pragma once

#include <string>
#include <vector>

#include "launcher/program/plain_program.h"

namespace dlaunch::launcher {

// A plain program in all it adds to a rank, but for its argv and the agent it expects.
class PythonProgram : public PlainProgram {
 public:
  using PlainProgram::PlainProgram;

  // interpreter, -u, then the script, `-m module` or the run-path launcher, then the user's
  // arguments (python::PythonArgv); says on stderr which interpreter, and from where. Throws
  // UsageError for an interpreter that does not run Python 3, a missing script, or a torch script
  // under an interpreter without torch. Blocks for short interpreter runs.
  std::vector<std::string> ResolveArgv() const override;
  // True with an agent folder, unless DLAUNCH_PYTHON_AGENT=0 (the job's, else dlaunch's own
  // environment; --no-python-agent sets it). Pure.
  bool ExpectsAgent(const Env& job_env, const Env& launcher_env) const override;
};

}  // namespace dlaunch::launcher
