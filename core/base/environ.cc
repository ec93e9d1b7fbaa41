#include "core/base/environ.h"

#include <unistd.h>

extern char** environ;

namespace dlaunch::base {

std::map<std::string, std::string> CurrentEnv() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

}  // namespace dlaunch::base
