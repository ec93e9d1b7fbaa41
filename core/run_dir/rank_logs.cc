#include "core/run_dir/rank_logs.h"

#include <algorithm>
#include <filesystem>

#include "core/base/files.h"

namespace dlaunch::rundir {

namespace fs = std::filesystem;

void WriteStacks(const std::string& path, const std::string& text) {
  base::WriteFileAtomically(path, text);
}

std::string ReadStacks(const std::string& path) {
  std::string text;
  const base::ReadStatus status = base::ReadFileBounded(path, kMaxStacksBytes, &text);
  if (status != base::ReadStatus::kOk && status != base::ReadStatus::kTooLarge) return "";
  return text;
}

std::vector<std::string> ReadLogTail(const std::string& path, size_t n) {
  return base::TailLines(path, n);
}

std::vector<std::string> ReadNcclWarnings(const RankDir& dir) {
  std::error_code ec;
  std::vector<fs::path> logs;
  for (const auto& entry : fs::directory_iterator(dir.path(), ec)) {
    if (RankDir::IsNcclLog(entry.path().filename().string())) logs.push_back(entry.path());
    if (logs.size() > 64) break;  // a folder full of them is not worth reading all of
  }
  std::sort(logs.begin(), logs.end());
  std::vector<std::string> warnings;
  for (const fs::path& log : logs) {
    std::string text;
    const base::ReadStatus status = base::ReadFileBounded(log.string(), kMaxNcclScanBytes, &text);
    if (status != base::ReadStatus::kOk && status != base::ReadStatus::kTooLarge) continue;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      std::string_view line(text.data() + pos, end - pos);
      pos = end + 1;
      if (line.find("NCCL WARN") == std::string_view::npos &&
          line.find(" WARN ") == std::string_view::npos) {
        continue;
      }
      if (warnings.size() == kMaxNcclWarnings) {
        warnings.push_back("... (more WARN lines in " + log.filename().string() + ")");
        return warnings;
      }
      warnings.emplace_back(line);
    }
  }
  return warnings;
}

}  // namespace dlaunch::rundir
