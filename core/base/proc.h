// Facts about this process and host from the kernel.
#pragma once

#include <cstdint>
#include <string>

namespace dlaunch::base {

// A "<field>: <n> kB" line of /proc/self/status in bytes (VmRSS, VmHWM, VmSize, ...); -1 when
// absent or unreadable. Blocks for one small read.
int64_t ProcStatusBytes(const char* field);

// This host's name (gethostname); "" when it cannot be read.
std::string Hostname();

// The environment variable `name` as an integer; `fallback` when it is unset or empty.
int EnvInt(const char* name, int fallback);

}  // namespace dlaunch::base
