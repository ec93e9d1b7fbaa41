// The process environment as a value, for the code that reads variables from a map (the command
// line's Kubeflow variables, the cluster's detectors, the job's plan) and is tested with made-up
// ones.
#pragma once

#include <map>
#include <string>

namespace dlaunch::base {

// Every variable of this process's environment (environ), read now.
std::map<std::string, std::string> CurrentEnv();

}  // namespace dlaunch::base
