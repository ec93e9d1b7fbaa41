// Readers of nccl-tests output, for the tests: one structural parser used on both the reference
// fixture and dlaunch's tables, and the documented parsing rules of three public tools that
// consume nccl-tests output (reimplemented from their descriptions, not copied):
//  - FlagPerf: `grep "# Avg bus bandwidth" | awk '{print $NF}'` must yield one number;
//  - superbench, old rule: rows from 4 lines after the last "out-of-place" line up to
//    "Out of bounds values", whitespace-split, stop at a row of <= 10 fields, busbw = field [-6];
//  - superbench, new rule: column positions from the header line (counted from the end), rows
//    are the lines that start with a number, size != 0 rows give busbw/algbw/time;
//  - AWS nccl_to_csv: a row regex over size, count, type, redop, root and both column groups,
//    and "# Avg bus bandwidth : X".
#pragma once

#include <algorithm>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace dlaunch::worker::testing {

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

inline std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

// The structure of one nccl-tests section.
struct NcclTestsSection {
  std::string starting;  // program name from "# Collective test starting: X"
  std::vector<std::string> device_lines;
  std::string group_line, header_line, units_line;
  std::vector<std::vector<std::string>> rows;
  std::string out_of_bounds_line, avg_line;
  std::string concluded;
};

inline NcclTestsSection ParseNcclTests(const std::string& text) {
  NcclTestsSection s;
  bool in_devices = false;
  const std::string kStart = "# Collective test starting: ", kEnd = "# Collective test concluded: ";
  for (const std::string& line : Lines(text)) {
    if (line.rfind(kStart, 0) == 0) s.starting = line.substr(kStart.size());
    if (line.rfind(kEnd, 0) == 0) s.concluded = line.substr(kEnd.size());
    if (line == "# Using devices") {
      in_devices = true;
      continue;
    }
    if (in_devices && line.rfind("#  Rank ", 0) == 0) {
      s.device_lines.push_back(line);
      continue;
    }
    in_devices = false;
    if (line.find("out-of-place") != std::string::npos) s.group_line = line;
    if (line.find("#wrong") != std::string::npos) s.header_line = line;
    if (line.find("(elements)") != std::string::npos) s.units_line = line;
    if (line.rfind("# Out of bounds values", 0) == 0) s.out_of_bounds_line = line;
    if (line.rfind("# Avg bus bandwidth", 0) == 0) s.avg_line = line;
    if (!line.empty() && line[0] != '#' && !Fields(line).empty() &&
        std::isdigit(static_cast<unsigned char>(Fields(line)[0][0]))) {
      s.rows.push_back(Fields(line));
    }
  }
  return s;
}

inline std::vector<std::string> FlagPerfAvgBusBw(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& line : Lines(text)) {
    if (line.find("# Avg bus bandwidth") == std::string::npos) continue;
    auto f = Fields(line);
    out.push_back(f.empty() ? "" : f.back());
  }
  return out;
}

// -1 when nothing was found (the tool's "busbw -1"), NaN when it would raise.
inline double SuperbenchOld(const std::string& text) {
  auto lines = Lines(text);
  long oop = -1, oob = -1;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("out-of-place") != std::string::npos) oop = static_cast<long>(i);
    if (lines[i].find("Out of bounds values") != std::string::npos) oob = static_cast<long>(i);
  }
  double busbw = -1;
  try {
    // Python slicing: content[oop + 4 : oob].
    long begin = oop + 4, end = oob < 0 ? static_cast<long>(lines.size()) + oob : oob;
    for (long i = std::max(begin, 0L); i < end && i < static_cast<long>(lines.size()); ++i) {
      auto f = Fields(lines[i]);
      if (f.size() <= 10) break;
      busbw = std::max(busbw, std::stod(f[f.size() - 6]));
    }
  } catch (const std::exception&) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return busbw;
}

// size -> busbw; empty when the tool reports "format invalid".
inline std::map<long, double> SuperbenchNew(const std::string& text, bool in_place) {
  auto lines = Lines(text);
  long oop = -1, oob = -1;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("out-of-place") != std::string::npos) oop = static_cast<long>(i);
    if (lines[i].find("Out of bounds values") != std::string::npos) oob = static_cast<long>(i);
  }
  std::map<long, double> out;
  if (oop < 0 || oob < 0) return {};
  std::vector<std::string> content(lines.begin() + oop + 1, lines.begin() + std::max(oob, oop + 1));
  long size_index = -1, busbw_index = 0;
  bool have = false;
  for (const std::string& line : content) {
    if (line.find("time") == std::string::npos || line.find("busbw") == std::string::npos) continue;
    auto f = Fields(line.substr(1));
    auto it = std::find(f.begin(), f.end(), "size");
    if (it == f.end()) return {};
    size_index = it - f.begin();
    long n = static_cast<long>(f.size());
    if (in_place) {
      auto r = std::find(f.rbegin(), f.rend(), "busbw");
      busbw_index = -1 - (r - f.rbegin());
    } else {
      busbw_index = (std::find(f.begin(), f.end(), "busbw") - f.begin()) - n;
    }
    have = true;
    break;
  }
  if (!have) return {};
  try {
    for (const std::string& line : content) {
      auto f = Fields(line);
      if (f.empty() || !std::isdigit(static_cast<unsigned char>(f[0][0]))) continue;
      long size = std::stol(f.at(size_index));
      if (size != 0) out[size] = std::stod(f.at(f.size() + busbw_index));
    }
  } catch (const std::exception&) {
    return {};
  }
  return out;
}

struct AwsRow {
  long size = 0;
  double oop_busbw = 0, ip_busbw = 0;
};

inline std::vector<AwsRow> AwsNcclToCsv(const std::string& text, double* avg) {
  static const std::regex row(
      R"(^\s*(\d+)\s+(\d+)\s+(float|double|int|half)\s+(sum|prod|max|min|none)\s+(-?\d+)\s+)"
      R"((\d+\.?\d*)\s+(\d+\.?\d*)\s+(\d+\.?\d*)\s+(\d+|N/A)\s+(\d+\.?\d*)\s+(\d+\.?\d*)\s+)"
      R"((\d+\.?\d*)\s+(\d+|N/A))");
  static const std::regex avg_re(R"(# Avg bus bandwidth\s*:\s*(\d+\.?\d*))");
  std::vector<AwsRow> out;
  for (const std::string& line : Lines(text)) {
    std::smatch m;
    if (std::regex_search(line, m, row)) {
      out.push_back({std::stol(m[1]), std::stod(m[8]), std::stod(m[12])});
    } else if (std::regex_search(line, m, avg_re) && avg) {
      *avg = std::stod(m[1]);
    }
  }
  return out;
}

}  // namespace dlaunch::worker::testing
