// Facts about this process and host from the kernel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dlaunch::base {

// A "<field>: <n> kB" line of /proc/self/status in bytes (VmRSS, VmHWM, VmSize, ...); -1 when
// absent or unreadable. Blocks for one small read.
int64_t ProcStatusBytes(const char* field);
// Resident set size of this process and its peak (VmRSS, VmHWM); -1 when unreadable.
int64_t CurrentRssBytes();
int64_t PeakRssBytes();

// The state letter ('R', 'S', 'T', ...) and parent pid of process `pid`, from /proc/<pid>/stat;
// nullopt when it cannot be read (gone). ppid is 0 when the line stops after the state.
struct ProcStat {
  char state = 0;
  int ppid = 0;
};
std::optional<ProcStat> ReadProcStat(int pid);
// A state letter as ps spells it out: 'T' -> "T (stopped)", 'S' -> "S (sleeping)"; an unknown
// letter alone.
std::string ProcStateWord(char state);

// This host's name (gethostname); "" when it cannot be read.
std::string Hostname();

// GPUs the NVIDIA driver lists in kNvidiaGpuList; 0 without a driver. Blocks for one directory
// read.
inline constexpr const char* kNvidiaGpuList = "/proc/driver/nvidia/gpus";
int CountGpus();

// The environment variable `name` as an integer; `fallback` when it is unset or empty.
int EnvInt(const char* name, int fallback);

}  // namespace dlaunch::base
