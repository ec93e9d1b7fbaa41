#include "launcher/diagnose/format_util.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace dlaunch::launcher::text {

std::string FormatBytes(int64_t bytes) {
  if (bytes < 0) return "?";
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  if (unit == 0 || value == static_cast<int64_t>(value) || value >= 100) {
    std::snprintf(buf, sizeof(buf), "%.0f %s", value, kUnits[unit]);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f %s", value, kUnits[unit]);
  }
  return buf;
}

std::string FormatDurationMs(int64_t ms) {
  if (ms < 0) return "?";
  char buf[32];
  if (ms < 1000) {
    std::snprintf(buf, sizeof(buf), "%lld ms", static_cast<long long>(ms));
  } else if (ms < 10000) {
    std::snprintf(buf, sizeof(buf), "%.1f s", ms / 1000.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%lld s", static_cast<long long>((ms + 500) / 1000));
  }
  return buf;
}

std::string FormatRankList(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    if (j - i >= 2) {
      out += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
    } else {
      for (size_t k = i; k <= j; ++k) {
        if (k > i) out += ",";
        out += std::to_string(ranks[k]);
      }
    }
    i = j + 1;
  }
  return out;
}

std::string FormatUnixMs(int64_t unix_ms) {
  if (unix_ms <= 0) return "?";
  std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  if (abbrev == nullptr) return "signal " + std::to_string(signal);
  return std::string("SIG") + abbrev;
}

}  // namespace dlaunch::launcher::text
