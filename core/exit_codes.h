// Exit codes of dlaunch, and of its worker ranks where they mean the same thing.
#pragma once

namespace dlaunch {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRankFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitHang = 3;       // hang detected; a rank's collective watchdog fired
inline constexpr int kExitUnhealthy = 4;  // pre-flight verdict FAIL

}  // namespace dlaunch
