#include "launcher/nccl_log/line.h"

namespace dlaunch::launcher::nccl_log {

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool IsHostChar(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '.' ||
         c == '_';
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// Reads the decimal number ending just before `end`; returns its first index or npos.
size_t NumberBefore(std::string_view s, size_t end, int64_t* value) {
  size_t b = end;
  while (b > 0 && IsDigit(s[b - 1])) --b;
  if (b == end || end - b > 18) return std::string_view::npos;
  int64_t v = 0;
  for (size_t i = b; i < end; ++i) v = v * 10 + (s[i] - '0');
  *value = v;
  return b;
}

// "[1,3]<stdout>:" (Open MPI --tag-output) or "3: " (srun -l) -> 3 and the rest of the line.
std::string_view StripMpiPrefix(std::string_view s, int* mpi_rank) {
  if (!s.empty() && IsDigit(s[0])) {
    size_t i = 0;
    int rank = 0;
    while (i < s.size() && i < 7 && IsDigit(s[i])) rank = rank * 10 + (s[i++] - '0');
    if (s.substr(i, 2) != ": ") return s;
    *mpi_rank = rank;
    return s.substr(i + 2);
  }
  if (s.size() < 8 || s[0] != '[') return s;
  size_t i = 1;
  while (i < s.size() && IsDigit(s[i])) ++i;
  if (i == 1 || i >= s.size() || s[i] != ',') return s;
  size_t j = ++i;
  int rank = 0;
  while (i < s.size() && IsDigit(s[i])) rank = rank * 10 + (s[i++] - '0');
  if (i == j || s.substr(i, 2) != "]<") return s;
  size_t close = s.find(">:", i);
  if (close == std::string_view::npos || close > i + 10) return s;
  *mpi_rank = rank;
  return s.substr(close + 2);
}

// Finds "host:pid:tid [dev]" in `header`; returns the index just past "]" or npos.
size_t FindPrefix(std::string_view header, LogLine* out) {
  for (size_t i = header.find(" ["); i != std::string_view::npos; i = header.find(" [", i + 1)) {
    size_t d = i + 2;
    size_t e = d;
    if (e < header.size() && header[e] == '-') ++e;
    while (e < header.size() && IsDigit(header[e])) ++e;
    if (e == d || e >= header.size() || header[e] != ']') continue;
    int64_t tid = 0, pid = 0;
    size_t tb = NumberBefore(header, i, &tid);
    if (tb == std::string_view::npos || tb == 0 || header[tb - 1] != ':') continue;
    size_t pb = NumberBefore(header, tb - 1, &pid);
    if (pb == std::string_view::npos || pb == 0 || header[pb - 1] != ':') continue;
    size_t hb = pb - 1;
    while (hb > 0 && IsHostChar(header[hb - 1])) --hb;
    // Stops at the ':' or ']' of another tool's prefix such as "[default0]:".
    std::string_view host = header.substr(hb, pb - 1 - hb);
    if (host.empty()) continue;
    out->host = host;
    out->pid = pid;
    out->tid = tid;
    int dev = 0;
    bool neg = header[d] == '-';
    for (size_t k = neg ? d + 1 : d; k < e; ++k) dev = dev * 10 + (header[k] - '0');
    out->dev = neg ? -dev : dev;
    return e + 1;
  }
  return std::string_view::npos;
}

}  // namespace

bool SplitLine(std::string_view raw, LogLine* out) {
  *out = LogLine{};
  raw = TrimRight(raw);
  raw = StripMpiPrefix(raw, &out->mpi_rank);
  for (size_t p = raw.find("NCCL "); p != std::string_view::npos; p = raw.find("NCCL ", p + 5)) {
    if (p > 0) {
      char before = raw[p - 1];
      if (before != ' ' && before != ':' && before != ']' && before != '>') continue;
    }
    std::string_view rest = raw.substr(p + 5);
    size_t skip = 0;
    if (rest.substr(0, 5) == "INFO ") {
      out->level = Level::kInfo;
      skip = 5;
    } else if (rest.substr(0, 5) == "WARN ") {
      out->level = Level::kWarn;
      skip = 5;
    } else if (rest.substr(0, 6) == "TRACE ") {
      out->level = Level::kTrace;
      skip = 6;
    } else if (rest.substr(0, 8) == "version ") {
      out->level = Level::kVersion;
      out->message = raw.substr(p);
      FindPrefix(raw.substr(0, p), out);
      return true;
    } else {
      continue;
    }
    std::string_view header = raw.substr(0, p);
    size_t after = FindPrefix(header, out);
    if (out->level == Level::kWarn && after != std::string_view::npos) {
      std::string_view where = TrimRight(header.substr(after));
      while (!where.empty() && where.front() == ' ') where.remove_prefix(1);
      out->where = where;
    }
    out->message = rest.substr(skip);
    while (!out->message.empty() && out->message.front() == ' ') out->message.remove_prefix(1);
    return true;
  }
  return false;
}

}  // namespace dlaunch::launcher::nccl_log
