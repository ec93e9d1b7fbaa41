// Per-rank telemetry readings: memory of this process.
#pragma once

#include <cstdint>

namespace dlaunch::core {

// Resident set size of this process and its peak, from /proc/self/status; -1 when unreadable.
int64_t CurrentRssBytes();
int64_t PeakRssBytes();

}  // namespace dlaunch::core
