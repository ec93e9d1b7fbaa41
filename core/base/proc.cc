#include "core/base/proc.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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

int64_t CurrentRssBytes() { return ProcStatusBytes("VmRSS"); }
int64_t PeakRssBytes() { return ProcStatusBytes("VmHWM"); }

std::string ProcStateWord(char c) {
  switch (c) {
    case 'R':
      return "R (running)";
    case 'S':
      return "S (sleeping)";
    case 'D':
      return "D (disk sleep)";
    case 'T':
      return "T (stopped)";
    case 't':
      return "t (tracing stop)";
    case 'Z':
      return "Z (zombie)";
    case 'X':
      return "X (dead)";
    default:
      return std::string(1, c);
  }
}

std::optional<ProcStat> ReadProcStat(int pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  // The command name may hold spaces and parentheses: state and ppid follow the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  ProcStat st;
  const int got = std::sscanf(stat.c_str() + close + 1, " %c %d", &st.state, &st.ppid);
  if (got < 1) return std::nullopt;
  if (got < 2) st.ppid = 0;
  return st;
}

std::string Hostname() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "";
  return host;
}

int CountGpus() {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator(kNvidiaGpuList, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace dlaunch::base
