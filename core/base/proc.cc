#include "core/base/proc.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

namespace dlaunch::base {

int64_t ProcStatusBytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t len = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, len, field) == 0 && line.size() > len && line[len] == ':') {
      try {
        return std::stoll(line.substr(len + 1)) * 1024;
      } catch (const std::exception&) {
        return -1;
      }
    }
  }
  return -1;
}

std::string Hostname() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "";
  return host;
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace dlaunch::base
