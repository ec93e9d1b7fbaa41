// One line of an NCCL debug log split into its prefix and message. NCCL writes
//   [timestamp] host:pid:tid [cudaDev] NCCL INFO message
//   [timestamp] host:pid:tid [cudaDev] file.cc:123 [(func)] NCCL WARN message
// and, for the VERSION level or rank 0's stdout, a bare "NCCL version 2.5.6+cuda10.2". Other
// launchers add their own prefixes in front ("[1,0]<stdout>:" from Open MPI, "[default0]:" from
// torchrun, "0: " from srun -l); the prefix is found wherever it sits in the line.
#pragma once

#include <cstdint>
#include <string_view>

namespace dlaunch::launcher::nccl_log {

enum class Level { kInfo, kWarn, kTrace, kVersion };

struct LogLine {
  Level level = Level::kInfo;
  std::string_view host;  // empty when the line had no host:pid:tid prefix
  int64_t pid = -1;
  int64_t tid = -1;
  int dev = -1;            // the cudaDev NCCL printed in brackets
  std::string_view where;  // WARN only: "init.cc:123" (with "(func)" when NCCL printed it)
  std::string_view message;
  int mpi_rank = -1;  // from Open MPI's "[job,rank]<stdout>:" or srun's "rank: " prefix
};

// Whether `s` begins with `prefix`: the test most of a log line's reading is made of.
inline bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Splits `raw` (one line, without its newline). Returns false for a line that is not NCCL's.
// The views point into `raw`. Does not allocate.
bool SplitLine(std::string_view raw, LogLine* out);

}  // namespace dlaunch::launcher::nccl_log
