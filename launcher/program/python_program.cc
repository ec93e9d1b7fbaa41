#include "launcher/program/python_program.h"

#include <iostream>

#include "launcher/python/python_launch.h"

namespace dlaunch::launcher {

std::vector<std::string> PythonProgram::ResolveArgv() const {
  const python::Interpreter interpreter = python::ResolveInterpreter(options());
  python::CheckInterpreterRuns(interpreter);
  std::cerr << "dlaunch: python " << interpreter.path << " (from " << interpreter.source << ")"
            << std::endl;
  return python::PythonArgv(options(), interpreter);
}

bool PythonProgram::ExpectsAgent(const Env& job_env, const Env& launcher_env) const {
  if (agent_dir().empty()) return false;
  auto it = job_env.find("DLAUNCH_PYTHON_AGENT");
  if (it == job_env.end()) {
    it = launcher_env.find("DLAUNCH_PYTHON_AGENT");
    if (it == launcher_env.end()) return true;
  }
  return it->second != "0";
}

}  // namespace dlaunch::launcher
