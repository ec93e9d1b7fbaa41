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

// "[rank R] line\n" for each line, as one string to hand to a single write(2), so no other
// rank's bytes can land inside a line.
std::string PrefixLines(int rank, const std::vector<std::string>& lines);

// Writes all of `data` to fd, retrying short writes and EINTR. Returns false on error.
bool WriteAll(int fd, std::string_view data);

}  // namespace dlaunch::launcher
