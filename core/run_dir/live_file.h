// live.json: how `dlaunch status RUN_DIR` reaches the job. Node 0's launcher writes it when its
// coordinator serves, owner-only (0600), and removes it when the job ends: the endpoint of its
// coordinator and a status token that admits GetStatus only (it reads the job, never changes it).
// docs/run-directory.md, "live.json".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/run_dir/schema.h"

namespace dlaunch::rundir {

inline constexpr char kLiveSchema[] = "live";
inline constexpr size_t kMaxLiveBytes = 64 << 10;

struct LiveEndpoint {
  std::string endpoint;      // "host:port" of node 0's coordinator
  std::string status_token;  // admits GetStatus only
  std::string host;          // node 0's host name
  int pid = 0;               // node 0's launcher
  int64_t unix_ms = 0;       // when it was written
};

// Writes `path` atomically with mode 0600 (a temporary file created 0600, then renamed), so the
// token is never readable by others, not even for a moment. Throws Error(kInternal) when it
// cannot be written. Blocks for the write.
void WriteLiveEndpoint(const std::string& path, const LiveEndpoint& live);

// kAbsent when there is no file; kInvalid (a problem line says why) for one that is not a
// live.json or lacks the endpoint. Never throws.
FileState ReadLiveEndpoint(const std::string& path, const std::string& label, LiveEndpoint* out,
                           std::vector<std::string>* problems);

}  // namespace dlaunch::rundir
