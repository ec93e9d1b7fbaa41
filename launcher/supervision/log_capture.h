// Turning a rank's byte stream into whole console lines.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlaunch::launcher {

// Splits a byte stream into lines. A line longer than kMaxLine is cut there, so a rank printing
// without newlines cannot grow the launcher without bound.
class LineSplitter {
 public:
  static constexpr size_t kMaxLine = 1 << 20;

  // Appends the complete lines in `data` (without their '\n') to `lines`.
  void Feed(std::string_view data, std::vector<std::string>* lines);
  // The unterminated rest, if any; clears it.
  std::optional<std::string> Flush();

 private:
  std::string partial_;
};

// "<prefix>line\n" for each line, as one string to hand to a single write(2), so no other
// rank's bytes can land inside a line.
std::string PrefixLines(const std::string& prefix, const std::vector<std::string>& lines);
// "[rank R] ", the prefix of a rank's console lines when nothing else is asked for.
std::string DefaultLinePrefix(int rank);

// torchrun's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE with Python's string.Template.safe_substitute:
// ${role_name} or $role_name, ${rank}, ${local_rank}, ${hostname} are replaced, "$$" is "$",
// anything else stays as written. The result is the whole prefix, as torchrun prints it
// ("[${rank}]:" gives "[3]:line"). Pure.
std::string ExpandLinePrefix(const std::string& tmpl, const std::string& role_name, int rank,
                             int local_rank, const std::string& hostname = "");

// Writes all of `data` to fd, retrying short writes and EINTR. Returns false on error.
bool WriteAll(int fd, std::string_view data);

}  // namespace dlaunch::launcher
