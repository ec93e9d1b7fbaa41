// Per-rank telemetry readings: memory of this process.
#pragma once

#include <cstdint>

#include "core/base/clock.h"
#include "core/base/files.h"
#include "core/run_dir/events_file.h"

namespace dlaunch::core {

// Resident set size of this process and its peak, from /proc/self/status; -1 when unreadable.
int64_t CurrentRssBytes();
int64_t PeakRssBytes();

}  // namespace dlaunch::core
