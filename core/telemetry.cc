#include "core/telemetry.h"

#include "core/base/proc.h"

namespace dlaunch::core {

int64_t CurrentRssBytes() { return base::ProcStatusBytes("VmRSS"); }
int64_t PeakRssBytes() { return base::ProcStatusBytes("VmHWM"); }

}  // namespace dlaunch::core
