// Small text helpers shared by the diagnosis code (own namespace: the launcher has its own
// SignalName and friends).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlaunch::launcher::text {

std::string FormatBytes(int64_t bytes);              // "4 MiB", "1.5 GiB", "512 B"
std::string FormatDurationMs(int64_t ms);            // "310 s", "2.5 s", "40 ms"
std::string FormatRankList(std::vector<int> ranks);  // "0,1,3" or "0-5,7"
std::string FormatUnixMs(int64_t unix_ms);           // "2026-11-29 21:03:04 UTC"
std::string SignalName(int signal);                  // "SIGKILL"

}  // namespace dlaunch::launcher::text
