#include "launcher/rendezvous/file_push.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <set>

#include "core/base/unique_fd.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxChunk = 1 << 20;
constexpr int64_t kWindow = 4096;                    // compared ends of the sent prefix, on kQuick
constexpr int64_t kThoroughMax = int64_t{16} << 20;  // larger files: the ends only, always
constexpr int64_t kAlwaysCompare = 256 << 10;        // smaller ones: content, every push

int64_t Nanos(const struct timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// Never waits on a FIFO put in a file's place.
base::UniqueFd OpenToRead(const std::string& path) {
  return base::UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
}

// Reads [at, at + n) of `fd`; false on an I/O error or when the file is shorter now.
bool ReadAt(int fd, int64_t at, int64_t n, std::string* out) {
  out->resize(static_cast<size_t>(n));
  int64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, out->data() + done, static_cast<size_t>(n - done), at + done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    done += got;
  }
  return true;
}

uint32_t Crc(uint32_t crc, const std::string& data) {
  return static_cast<uint32_t>(
      ::crc32(crc, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
}

// crc32 of [0, n) of `fd`, read in chunks; nullopt on a short read.
std::optional<uint32_t> CrcOfPrefix(int fd, int64_t n) {
  uint32_t crc = ::crc32(0, nullptr, 0);
  std::string buf;
  for (int64_t at = 0; at < n; at += kMaxChunk) {
    if (!ReadAt(fd, at, std::min(kMaxChunk, n - at), &buf)) return std::nullopt;
    crc = Crc(crc, buf);
  }
  return crc;
}

// Whether the first `sent.size` bytes of the file are still the ones sent. kQuick compares only
// the ends of that prefix when it is long: an append leaves them as they were.
template <typename Sent>
bool PrefixUnchanged(int fd, const Sent& sent, bool thorough) {
  if ((thorough || sent.size <= 2 * kWindow) && sent.size <= kThoroughMax) {
    const std::optional<uint32_t> crc = CrcOfPrefix(fd, sent.size);
    return crc && *crc == sent.crc;
  }
  std::string head, tail;
  return ReadAt(fd, 0, kWindow, &head) && head == sent.head &&
         ReadAt(fd, sent.size - kWindow, kWindow, &tail) && tail == sent.tail;
}

// File times come from a coarse clock: a write within the same tick as the one seen leaves them
// unchanged. Until the clock is well past them, unchanged times prove nothing.
bool Racy(int64_t mtime_ns, int64_t ctime_ns) {
  constexpr int64_t kTickNs = 100'000'000;
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return Nanos(now) - std::max(mtime_ns, ctime_ns) < kTickNs;
}

}  // namespace

bool RankFilePusher::Push(const std::map<int, std::string>& rank_dirs, Check check) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool thorough = check == Check::kThorough;
  for (const auto& [rank, dir] : rank_dirs) {
    std::set<std::string> present;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (!entry.is_regular_file(ec)) continue;
      const std::string path = entry.path().string();
      const std::string name = entry.path().filename().string();
      if (name.find(".tmp.") != std::string::npos) continue;  // half-written, renamed soon
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0) continue;
      present.insert(path);
      auto it = sent_.find(path);
      if (it == sent_.end()) {
        Sent fresh;
        fresh.rank = rank;
        fresh.name = name;
        if (!SendFile(rank, name, path, 0, &fresh)) return false;
        sent_[path] = fresh;
        continue;
      }
      Sent& sent = it->second;
      const bool same_stat = sent.inode == st.st_ino && sent.size == st.st_size &&
                             sent.mtime_ns == Nanos(st.st_mtim) &&
                             sent.ctime_ns == Nanos(st.st_ctim);
      // A small file is compared by content every time: a file written through a shared mapping
      // (the agent's flight tail) keeps its times until the kernel writes its pages back.
      const bool small = sent.size <= kAlwaysCompare;
      if (same_stat && !small && !sent.racy && (!thorough || sent.size > kThoroughMax)) continue;
      // The same size in place: the same bytes (only the times moved, or a racy entry), or a
      // rewrite, which needs a whole version.
      if (sent.inode == st.st_ino && sent.size == st.st_size && sent.size <= kThoroughMax) {
        base::UniqueFd fd = OpenToRead(path);
        const std::optional<uint32_t> crc =
            fd.get() < 0 ? std::nullopt : CrcOfPrefix(fd.get(), sent.size);
        if (crc && *crc == sent.crc) {
          sent.mtime_ns = Nanos(st.st_mtim);
          sent.ctime_ns = Nanos(st.st_ctim);
          sent.racy = Racy(sent.mtime_ns, sent.ctime_ns);
          continue;
        }
      }
      int64_t from = 0;  // a whole version, unless the file only grew
      if (sent.inode == st.st_ino && st.st_size > sent.size) {
        base::UniqueFd fd = OpenToRead(path);
        if (fd.get() < 0) continue;
        if (PrefixUnchanged(fd.get(), sent, thorough)) from = sent.size;
      }
      if (!SendFile(rank, name, path, from, &sent)) return false;
    }
    // Files gone from this folder: node 0 drops its copies.
    for (auto it = sent_.begin(); it != sent_.end();) {
      if (it->second.rank != rank || present.count(it->first)) {
        ++it;
        continue;
      }
      v1::FileChunk gone;
      gone.set_rank(rank);
      gone.set_name(it->second.name);
      gone.set_removed(true);
      if (!send_(gone)) return false;
      it = sent_.erase(it);
    }
  }
  return true;
}

void RankFilePusher::Forget() {
  std::lock_guard<std::mutex> lock(mu_);
  sent_.clear();
}

bool RankFilePusher::SendFile(int rank, const std::string& name, const std::string& path,
                              int64_t from, Sent* sent) {
  base::UniqueFd fd = OpenToRead(path);
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return true;
  const bool whole = from == 0;
  uint32_t crc = whole ? ::crc32(0, nullptr, 0) : sent->crc;
  std::string head = whole ? "" : sent->head;
  std::string tail = whole ? "" : sent->tail;
  int64_t at = from;
  std::string data;
  do {
    const int64_t n = std::min(kMaxChunk, static_cast<int64_t>(st.st_size) - at);
    if (n > 0 && !ReadAt(fd.get(), at, n, &data)) return true;  // shrank meanwhile: next time
    if (n <= 0) data.clear();
    v1::FileChunk chunk;
    chunk.set_rank(rank);
    chunk.set_name(name);
    chunk.set_offset(at);
    chunk.set_data(data);
    chunk.set_whole(whole);
    at += static_cast<int64_t>(data.size());
    chunk.set_last(whole && at >= st.st_size);
    if (!send_(chunk)) return false;
    crc = Crc(crc, data);
    if (head.size() < kWindow) head += data.substr(0, kWindow - head.size());
    tail += data;
    if (tail.size() > kWindow) tail.erase(0, tail.size() - kWindow);
  } while (at < st.st_size);
  // What was sent is the file as it was when it was opened (a change since shows in its times).
  sent->inode = st.st_ino;
  sent->size = at;
  sent->mtime_ns = Nanos(st.st_mtim);
  sent->ctime_ns = Nanos(st.st_ctim);
  sent->crc = crc;
  sent->head = std::move(head);
  sent->tail = std::move(tail);
  sent->racy = Racy(sent->mtime_ns, sent->ctime_ns);
  return true;
}

}  // namespace dlaunch::launcher
