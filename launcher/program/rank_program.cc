#include "launcher/program/rank_program.h"

#include <string>

#include "core/exit_codes.h"
#include "launcher/program/plain_program.h"
#include "launcher/program/preflight_program.h"
#include "launcher/program/python_program.h"
#include "launcher/program/train_program.h"
#include "launcher/python/python_launch.h"

namespace dlaunch::launcher {
namespace {

// True when dlaunch itself picks the interpreter: a .py program (unless --no-python), -m or
// --run-path. `python3 t.py` is a plain program that happens to run Python.
bool IsPythonEntry(const LaunchOptions& o) {
  if (o.command != Command::kProgram || o.program.empty()) return false;
  if (o.module || o.run_path) return true;
  const std::string& entry = o.program.front();
  return !o.no_python && entry.size() >= 3 && entry.compare(entry.size() - 3, 3, ".py") == 0;
}

}  // namespace

int RankProgram::ExitCode(const RankOutcome&) const { return kExitRankFailed; }

ProgramSite FindProgramSite(const std::string& self_exe) {
  return ProgramSite{self_exe, python::FindAgentDir(self_exe)};
}

std::shared_ptr<const RankProgram> MakeRankProgram(const LaunchOptions& o,
                                                   const ProgramSite& site) {
  if (o.command == Command::kTrain) return std::make_shared<TrainProgram>(o, site.self_exe);
  if (o.command == Command::kPreflight) {
    return std::make_shared<PreflightProgram>(o, site.self_exe);
  }
  if (IsPythonEntry(o)) return std::make_shared<PythonProgram>(o, site.agent_dir);
  return std::make_shared<PlainProgram>(o, site.agent_dir);
}

bool RunsRanks(Command command) { return command == Command::kProgram || IsBuiltin(command); }

}  // namespace dlaunch::launcher
