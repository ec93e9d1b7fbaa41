#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "core/run_dir/paths.h"
#include "launcher/nccl_log/line.h"
#include "launcher/nccl_log/parser.h"

namespace dlaunch::launcher::nccl_log {

namespace {

constexpr size_t kChunk = 1 << 20;
constexpr size_t kMaxLine = 64 << 10;

}  // namespace

bool ReadLines(const std::string& path, const std::function<void(std::string_view)>& on_line,
               int64_t* bytes, std::string* error) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    *error = "cannot be read";
    return false;
  }
  std::string buf(kChunk + kMaxLine, '\0');
  size_t have = 0;       // bytes of an unfinished line kept from the last chunk
  bool cutting = false;  // inside a line longer than kMaxLine: skip to its newline
  while (true) {
    size_t n = std::fread(&buf[have], 1, kChunk, f);
    *bytes += static_cast<int64_t>(n);
    if (n == 0) break;
    std::string_view data(buf.data(), have + n);
    size_t start = 0;
    while (true) {
      const void* nl = std::memchr(data.data() + start, '\n', data.size() - start);
      if (!nl) break;
      size_t end = static_cast<const char*>(nl) - data.data();
      if (!cutting) on_line(data.substr(start, std::min(end - start, kMaxLine)));
      cutting = false;
      start = end + 1;
    }
    have = data.size() - start;
    if (have > kMaxLine) {
      if (!cutting) on_line(data.substr(start, kMaxLine));
      cutting = true;
      have = 0;
    } else if (start > 0) {
      std::memmove(&buf[0], data.data() + start, have);
    }
  }
  if (have > 0 && !cutting) on_line(std::string_view(buf.data(), have));
  bool ok = !std::ferror(f);
  std::fclose(f);
  if (!ok) *error = "read error";
  return ok;
}

std::string NormalizeBusId(std::string_view id) {
  std::string out;
  if (StartsWith(id, "0x") || StartsWith(id, "0X")) id.remove_prefix(2);
  for (char c : id) {
    if (c == ':' || c == '.') continue;
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    if (!hex) break;
    if (out.empty() && c == '0') continue;
    out.push_back(c);
  }
  if (out.empty() && !id.empty() && id[0] == '0') out = "0";
  return out;
}

ParseResult ParseRankDirs(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::pair<int, std::string>> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::optional<int> rank = rundir::RunDir::ParseRankDirName(it->path().filename().string());
    if (!rank || !it->is_directory(ec)) continue;
    for (fs::directory_iterator f(it->path(), ec), fend; !ec && f != fend; f.increment(ec)) {
      if (rundir::RankDir::IsNcclLog(f->path().filename().string())) {
        files.emplace_back(*rank, f->path().string());
      }
    }
  }
  std::sort(files.begin(), files.end());
  LogParser parser;
  if (ec && files.empty()) parser.BeginSource(dir);
  for (const auto& [rank, path] : files) parser.AddFile(path, rank);
  ParseResult out = parser.Finish();
  if (ec && files.empty()) out.problems.push_back(dir + ": " + ec.message());
  return out;
}

ParseResult ParseFiles(const std::vector<std::string>& paths) {
  LogParser parser;
  for (const std::string& p : paths) parser.AddFile(p);
  return parser.Finish();
}

}  // namespace dlaunch::launcher::nccl_log
