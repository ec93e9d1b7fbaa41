#include "launcher/doctor/system_parsers.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/base/format.h"

namespace dlaunch::launcher {

std::string ParseNvidiaDriverVersion(const std::string& proc_text) {
  static const std::regex kModule(R"(Kernel Module(?: for \S+)?\s+([0-9]+(?:\.[0-9]+)+))");
  std::smatch m;
  if (std::regex_search(proc_text, m, kModule)) return m[1].str();
  return "";
}

bool ParseMemInfo(const std::string& text, uint64_t* total_bytes, uint64_t* available_bytes) {
  std::istringstream in(text);
  std::string line;
  bool have_total = false;
  *available_bytes = 0;
  while (std::getline(in, line)) {
    unsigned long long kb = 0;
    if (std::sscanf(line.c_str(), "MemTotal: %llu kB", &kb) == 1) {
      *total_bytes = kb * 1024;
      have_total = true;
    } else if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kb) == 1) {
      *available_bytes = kb * 1024;
    }
  }
  return have_total;
}

void ParseCpuInfo(const std::string& text, std::string* model, int* count) {
  std::istringstream in(text);
  std::string line;
  *count = 0;
  model->clear();
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    std::string value = colon + 1 < line.size() ? line.substr(colon + 1) : "";
    value.erase(0, value.find_first_not_of(" \t"));
    if (key == "processor") ++*count;
    if (key == "model name" && model->empty()) *model = value;
  }
}

std::string ParseOsRelease(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("PRETTY_NAME=", 0) != 0) continue;
    std::string value = line.substr(12);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'')) {
      value = value.substr(1, value.size() - 2);
    }
    return value;
  }
  return "";
}

bool ReadSmallTextFile(const std::string& path, std::string* text) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream out;
  out << in.rdbuf();
  *text = out.str();
  return true;
}

std::string FormatByteCount(uint64_t bytes) {
  return base::FormatBytes(static_cast<int64_t>(std::min<uint64_t>(bytes, INT64_MAX)),
                           base::ByteStyle::kOneDecimal);
}

}  // namespace dlaunch::launcher
