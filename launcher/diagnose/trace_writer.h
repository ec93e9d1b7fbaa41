// The run as a Chrome trace-event timeline (opens in Perfetto or chrome://tracing): one process
// track per rank, with a "collectives" thread (one slice per flight-recorder entry) and a "phases"
// thread (one slice per training phase from the telemetry events).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "launcher/diagnose/diagnosis.h"
#include "launcher/diagnose/run_snapshot.h"

namespace dlaunch::launcher {

// `diagnosis` may be null; when given, its culprit ranks are marked and the hang is an instant
// event. Does not block.
nlohmann::json BuildTrace(const RunSnapshot& run, const Diagnosis* diagnosis);

// Writes BuildTrace() to `path` atomically. Throws Error(kInternal) when it cannot.
void WriteTrace(const RunSnapshot& run, const Diagnosis* diagnosis, const std::string& path);

}  // namespace dlaunch::launcher
