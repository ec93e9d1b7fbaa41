#include "launcher/supervision/log_capture.h"

#include <unistd.h>

#include <cerrno>

namespace dlaunch::launcher {

void LineSplitter::Feed(std::string_view data, std::vector<std::string>* lines) {
  while (!data.empty()) {
    size_t nl = data.find('\n');
    size_t take = nl == std::string_view::npos ? data.size() : nl;
    size_t room = kMaxLine - partial_.size();
    if (take >= room) {
      partial_.append(data.substr(0, room));
      lines->push_back(std::move(partial_));
      partial_.clear();
      data.remove_prefix(room);
      continue;
    }
    partial_.append(data.substr(0, take));
    if (nl == std::string_view::npos) return;
    lines->push_back(std::move(partial_));
    partial_.clear();
    data.remove_prefix(nl + 1);
  }
}

std::optional<std::string> LineSplitter::Flush() {
  if (partial_.empty()) return std::nullopt;
  std::string rest = std::move(partial_);
  partial_.clear();
  return rest;
}

std::string PrefixLines(int rank, const std::vector<std::string>& lines) {
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  std::string out;
  for (const auto& l : lines) {
    out += prefix;
    out += l;
    out += '\n';
  }
  return out;
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace dlaunch::launcher
