#include "core/base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/base/unique_fd.h"
#include "core/error.h"

namespace dlaunch::base {
namespace {

constexpr char kTempInfix[] = ".tmp.";

// Opens a regular file for reading without blocking on FIFOs; -1 with `status` set otherwise.
int OpenRegular(const std::string& path, ReadStatus* status, struct stat* st) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    *status = errno == ENOENT || errno == ENOTDIR ? ReadStatus::kMissing : ReadStatus::kError;
    return -1;
  }
  if (::fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
    *status = S_ISREG(st->st_mode) ? ReadStatus::kError : ReadStatus::kNotRegular;
    ::close(fd);
    return -1;
  }
  *status = ReadStatus::kOk;
  return fd;
}

// Reads up to `max` bytes from the current offset; false on an I/O error.
bool ReadUpTo(int fd, size_t max, std::string* out) {
  out->clear();
  char buf[64 * 1024];
  while (out->size() < max) {
    size_t want = std::min(sizeof(buf), max - out->size());
    ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  return true;
}

// The umask without changing it (umask(2) can only be read by setting it, which races with other
// threads creating files); 022 when /proc does not say.
mode_t ProcessUmask() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Umask:", 0) == 0)
      return static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
  }
  return 022;
}

void WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(ErrorKind::kInternal, "write " + path + ": " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string ReadWholeFile(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) throw UsageError(std::string("cannot read ") + what + " '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ReadStatus ReadFileBounded(const std::string& path, size_t max_bytes, std::string* out) {
  out->clear();
  ReadStatus status;
  struct stat st {};
  UniqueFd fd(OpenRegular(path, &status, &st));
  if (fd.get() < 0) return status;
  // One byte past the limit tells "exactly max" from "more than max" for files still growing.
  if (!ReadUpTo(fd.get(), max_bytes + 1, out)) return ReadStatus::kError;
  if (out->size() > max_bytes) {
    out->resize(max_bytes);
    return ReadStatus::kTooLarge;
  }
  return ReadStatus::kOk;
}

ReadStatus ReadFileTail(const std::string& path, size_t max_bytes, std::string* out) {
  out->clear();
  ReadStatus status;
  struct stat st {};
  UniqueFd fd(OpenRegular(path, &status, &st));
  if (fd.get() < 0) return status;
  const off_t start =
      st.st_size > static_cast<off_t>(max_bytes) ? st.st_size - static_cast<off_t>(max_bytes) : 0;
  if (start > 0 && ::lseek(fd.get(), start, SEEK_SET) != start) return ReadStatus::kError;
  if (!ReadUpTo(fd.get(), max_bytes, out)) return ReadStatus::kError;
  return start > 0 ? ReadStatus::kTooLarge : ReadStatus::kOk;
}

std::string DescribeReadStatus(ReadStatus status, size_t max_bytes) {
  switch (status) {
    case ReadStatus::kOk:
      return "read";
    case ReadStatus::kMissing:
      return "missing";
    case ReadStatus::kNotRegular:
      return "not a regular file (skipped)";
    case ReadStatus::kTooLarge:
      return "larger than " + std::to_string(max_bytes >> 20) + " MiB (cut there)";
    case ReadStatus::kError:
      return "unreadable";
  }
  return "unreadable";
}

std::vector<std::string> TailLines(const std::string& path, size_t n, size_t window_bytes) {
  std::string text;
  const ReadStatus status = ReadFileTail(path, window_bytes, &text);
  if ((status != ReadStatus::kOk && status != ReadStatus::kTooLarge) || n == 0) return {};
  std::vector<std::string> lines;
  size_t pos = 0;
  if (status == ReadStatus::kTooLarge) {  // a partial first line
    pos = text.find('\n');
    pos = pos == std::string::npos ? text.size() : pos + 1;
  }
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (end > pos) lines.emplace_back(text, pos, end - pos);
    pos = end + 1;
  }
  if (lines.size() > n) lines.erase(lines.begin(), lines.end() - static_cast<long>(n));
  return lines;
}

int64_t MtimeUnixMs(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

void WriteFileAtomically(const std::string& path, const std::string& content) {
  std::string tmp = path + kTempInfix + "XXXXXX";
  UniqueFd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (fd.get() < 0) {
    throw Error(ErrorKind::kInternal,
                "create a temporary file for " + path + ": " + std::strerror(errno));
  }
  try {
    // mkstemp creates 0600; the file gets the mode open(2) with 0644 would have given it.
    ::fchmod(fd.get(), 0644 & ~ProcessUmask());
    WriteAll(fd.get(), content, tmp);
    if (::fsync(fd.get()) != 0) {
      throw Error(ErrorKind::kInternal, "fsync " + tmp + ": " + std::strerror(errno));
    }
    if (::close(fd.release()) != 0) {
      throw Error(ErrorKind::kInternal, "close " + tmp + ": " + std::strerror(errno));
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      throw Error(ErrorKind::kInternal,
                  "rename " + tmp + " -> " + path + ": " + std::strerror(errno));
    }
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

bool IsAtomicWriteTemporary(const std::string& file_name) {
  return file_name.find(kTempInfix) != std::string::npos;
}

std::tuple<int64_t, int64_t, int64_t> FileVersion(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {0, 0, 0};
  return {static_cast<int64_t>(st.st_ino),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
          static_cast<int64_t>(st.st_size)};
}

std::string FindExecutable(const std::string& name) {
  auto usable = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) return usable(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (usable(candidate)) return candidate;
  }
  return "";
}

}  // namespace dlaunch::base
