// /metrics: a LiveSnapshot in the Prometheus text exposition format (0.0.4). Names carry the
// dlaunch_ prefix and their base unit, counters end in _total, per-rank series are labelled rank
// and host. Unknown figures are left out rather than exposed as a made-up value. No token or
// other secret is ever part of it. Pure.
#pragma once

#include <string>

#include "launcher/live/live_snapshot.h"

namespace dlaunch::launcher {

inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

std::string RenderMetrics(const LiveSnapshot& snapshot);

// A label value as the format escapes it: backslash, double quote and newline.
std::string EscapeLabelValue(const std::string& value);

}  // namespace dlaunch::launcher
