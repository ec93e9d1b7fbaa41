#include "launcher/supervision/log_capture.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <map>

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

std::string PrefixLines(const std::string& prefix, const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) {
    out += prefix;
    out += l;
    out += '\n';
  }
  return out;
}

std::string DefaultLinePrefix(int rank) { return "[rank " + std::to_string(rank) + "] "; }

std::string ExpandLinePrefix(const std::string& tmpl, const std::string& role_name, int rank,
                             int local_rank, const std::string& hostname) {
  const std::map<std::string, std::string> values = {{"role_name", role_name},
                                                     {"rank", std::to_string(rank)},
                                                     {"local_rank", std::to_string(local_rank)},
                                                     {"hostname", hostname}};
  // string.Template's identifiers: [_a-z][_a-z0-9]*, ASCII, either case.
  auto ident_start = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; };
  auto ident_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  for (size_t i = 0; i < tmpl.size();) {
    if (tmpl[i] != '$' || i + 1 == tmpl.size()) {
      out += tmpl[i++];
      continue;
    }
    if (tmpl[i + 1] == '$') {
      out += '$';
      i += 2;
      continue;
    }
    const bool braced = tmpl[i + 1] == '{';
    const size_t start = i + (braced ? 2 : 1);
    size_t end = start;
    if (end < tmpl.size() && ident_start(tmpl[end])) {
      while (end < tmpl.size() && ident_char(tmpl[end])) ++end;
    }
    const bool closed = !braced || (end < tmpl.size() && tmpl[end] == '}');
    auto it = end > start && closed ? values.find(tmpl.substr(start, end - start)) : values.end();
    if (it == values.end()) {  // not one of ours, or not an identifier: kept as written
      out += tmpl[i++];
      continue;
    }
    out += it->second;
    i = end + (braced ? 1 : 0);
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
