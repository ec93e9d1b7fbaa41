// Wall-clock readings in the units the run directory uses (Unix milliseconds and nanoseconds).
#pragma once

#include <cstdint>

namespace dlaunch::base {

// Wall clock (system_clock), so that readings from different processes and hosts line up in one
// run directory. Do not block.
int64_t UnixMillis();
int64_t UnixNanos();

}  // namespace dlaunch::base
