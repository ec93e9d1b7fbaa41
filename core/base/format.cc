#include "core/base/format.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>

namespace dlaunch::base {

std::string FormatHex(const unsigned char* bytes, size_t n) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += kHex[bytes[i] >> 4];
    s += kHex[bytes[i] & 15];
  }
  return s;
}

std::string RandomHex(size_t bytes) {
  std::random_device rd;
  std::vector<unsigned char> b(bytes);
  for (auto& v : b) v = static_cast<unsigned char>(rd() & 0xff);
  return FormatHex(b.data(), b.size());
}

std::string FormatBytes(int64_t bytes, ByteStyle style) {
  if (bytes < 0) return "?";
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  bool whole = style == ByteStyle::kOneDecimal
                   ? unit <= 1
                   : unit == 0 || value == static_cast<int64_t>(value) || value >= 100;
  char buf[32];
  std::snprintf(buf, sizeof(buf), whole ? "%.0f %s" : "%.1f %s", value, kUnits[unit]);
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

std::string NameRanks(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  const bool one = std::unique(ranks.begin(), ranks.end()) - ranks.begin() == 1;
  return (one ? "rank " : "ranks ") + FormatRankList(std::move(ranks));
}

std::string JoinInts(const std::vector<int>& values, std::string_view separator) {
  std::string out;
  for (int v : values) {
    if (!out.empty()) out += separator;
    out += std::to_string(v);
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

int SignalNumber(std::string_view name) {
  if (name.empty()) return 0;
  if (std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return name.size() <= 3 ? std::stoi(std::string(name)) : 0;
  }
  if (name.substr(0, 3) == "SIG") name.remove_prefix(3);
  for (int sig = 1; sig < 65; ++sig) {
    const char* abbrev = sigabbrev_np(sig);
    if (abbrev && name == abbrev) return sig;
  }
  return 0;
}

}  // namespace dlaunch::base
