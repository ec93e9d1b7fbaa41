// Reading and writing the small files dlaunch keeps: whole reads of configuration files,
// bounded reads of files other processes wrote (a run directory may be the remains of a crash, or
// hostile), tails of logs and atomic replacement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace dlaunch::base {

// A small file's whole content (a PEM file, a token); throws UsageError naming `what` (a flag)
// when it cannot be read. Blocks for the read.
std::string ReadWholeFile(const std::string& path, const char* what);

enum class ReadStatus {
  kOk,
  kMissing,     // no such file
  kNotRegular,  // a directory, FIFO, socket or device: never opened for reading
  kTooLarge,    // larger than the limit: `out` holds the first `max_bytes`
  kError,       // anything else (permissions, I/O)
};

// Reads a regular file of at most `max_bytes`. Never blocks on a FIFO (opened non-blocking and
// checked before reading), never reads more than `max_bytes`, never throws.
ReadStatus ReadFileBounded(const std::string& path, size_t max_bytes, std::string* out);

// Like ReadFileBounded, but a file larger than `max_bytes` yields its last `max_bytes` (still
// kTooLarge): for logs whose newest lines matter most.
ReadStatus ReadFileTail(const std::string& path, size_t max_bytes, std::string* out);

// "missing", "not a regular file", "larger than 64 MiB" ... for a problem line.
std::string DescribeReadStatus(ReadStatus status, size_t max_bytes);

// The last `n` non-empty lines of a regular file, reading at most its last `window_bytes`; empty
// when it cannot be read. Never blocks on a FIFO.
std::vector<std::string> TailLines(const std::string& path, size_t n,
                                   size_t window_bytes = 64 * 1024);

// Identity of one version of a file: (inode, mtime in ns, size); zeros when it does not exist. A
// file replaced by rename(2) (a rank answering a dump) gets a new inode. One stat(2).
std::tuple<int64_t, int64_t, int64_t> FileVersion(const std::string& path);

// Modification time of a file in Unix milliseconds; 0 when it does not exist.
int64_t MtimeUnixMs(const std::string& path);

// Writes `content` to `path` through a temporary file in the same folder, unique to this call
// (`<name>.tmp.XXXXXX`, from mkstemp), then fsync and rename(2): readers see the old or the new
// file, never half of one, and two writers of one path never share a temporary file. The
// temporary file is removed on every failure. Blocks for the write and the fsync; throws
// Error(kInternal) naming the path on failure.
void WriteFileAtomically(const std::string& path, const std::string& content);

// Whether a file name is one of WriteFileAtomically's temporary files (to skip while copying).
bool IsAtomicWriteTemporary(const std::string& file_name);

// `name` as execvp finds it: itself when it holds a '/', else the first executable file of that
// name in PATH's folders (an empty entry is the current folder; PATH unset reads as
// /usr/local/bin:/usr/bin:/bin); "" when there is none. Blocks for a stat(2) per folder.
std::string FindExecutable(const std::string& name);

}  // namespace dlaunch::base
