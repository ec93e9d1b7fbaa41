#include "worker/train/checkpoint_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dlaunch::worker {
namespace {

using nlohmann::json;

constexpr uint32_t kEndSig = 0x06054b50, kEnd64Sig = 0x06064b50, kEnd64LocatorSig = 0x07064b50;
constexpr uint32_t kCentralSig = 0x02014b50, kLocalSig = 0x04034b50;
constexpr size_t kEndSize = 22;
constexpr char kManifestTag[] = "dlaunch-checkpoint ";

uint64_t Le(const std::string& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(b[at + i]);
  return v;
}

[[noreturn]] void Bad(const std::string& path, const std::string& what) {
  throw UsageError("checkpoint " + path + ": " + what);
}

// The end-of-central-directory record: the last one in the final 64 KiB + 22 bytes.
size_t FindEnd(const std::string& b) {
  if (b.size() < kEndSize) return std::string::npos;
  const size_t lowest = b.size() > 65535 + kEndSize ? b.size() - 65535 - kEndSize : 0;
  for (size_t at = b.size() - kEndSize;; --at) {
    if (Le(b, at, 4) == kEndSig && at + kEndSize + Le(b, at + 20, 2) == b.size()) return at;
    if (at == lowest) return std::string::npos;
  }
}

json ManifestJson(const CheckpointManifest& m) {
  json shapes = json::array();
  for (const auto& [name, dims] : m.shapes) shapes.push_back({name, dims});
  return {{"schema", m.schema},
          {"step", m.step},
          {"total_steps", m.total_steps},
          {"steps_per_epoch", m.steps_per_epoch},
          {"world_size", m.world_size},
          {"per_rank_batch", m.per_rank_batch},
          {"global_batch", m.global_batch},
          {"steps_option", m.steps_option},
          {"seed", m.seed},
          {"model", m.key.model},
          {"feature_dim", m.key.feature_dim},
          {"classes", m.key.classes},
          {"hidden", m.key.hidden},
          {"shapes", shapes}};
}

CheckpointManifest ParseManifest(const std::string& path, const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) Bad(path, "its manifest (the zip comment) is not JSON");
  CheckpointManifest m;
  try {
    m.schema = j.at("schema").get<int>();
    if (m.schema != 1) Bad(path, "manifest schema " + std::to_string(m.schema) + " is unknown");
    m.step = j.at("step").get<int64_t>();
    m.total_steps = j.at("total_steps").get<int64_t>();
    m.steps_per_epoch = j.at("steps_per_epoch").get<int64_t>();
    m.world_size = j.at("world_size").get<int64_t>();
    m.per_rank_batch = j.at("per_rank_batch").get<int64_t>();
    m.global_batch = j.at("global_batch").get<int64_t>();
    m.steps_option = j.at("steps_option").get<int64_t>();
    m.seed = j.at("seed").get<uint64_t>();
    m.key.model = j.at("model").get<std::string>();
    m.key.feature_dim = j.at("feature_dim").get<int64_t>();
    m.key.classes = j.at("classes").get<int64_t>();
    m.key.hidden = j.at("hidden").get<int64_t>();
    for (const auto& s : j.at("shapes")) {
      m.shapes.emplace_back(s.at(0).get<std::string>(), s.at(1).get<std::vector<int64_t>>());
    }
  } catch (const json::exception& e) {
    Bad(path, std::string("its manifest is malformed: ") + e.what());
  }
  if (m.step < 0 || m.world_size <= 0 || m.per_rank_batch <= 0 || m.steps_per_epoch <= 0 ||
      m.global_batch != m.per_rank_batch * m.world_size || m.total_steps < m.step) {
    Bad(path, "its manifest is inconsistent (step " + std::to_string(m.step) + " of " +
                  std::to_string(m.total_steps) + ", world size " + std::to_string(m.world_size) +
                  ", batch " + std::to_string(m.per_rank_batch) + " x " +
                  std::to_string(m.world_size) + " = " + std::to_string(m.global_batch) + ")");
  }
  return m;
}

uLong Crc(const char* data, uint64_t size) {
  uLong sum = crc32(0L, Z_NULL, 0);
  for (uint64_t done = 0; done < size;) {
    const uInt chunk = static_cast<uInt>(std::min<uint64_t>(size - done, 1u << 30));
    sum = crc32(sum, reinterpret_cast<const Bytef*>(data + done), chunk);
    done += chunk;
  }
  return sum;
}

// A deflated entry (torch deflates its small code files): inflated in slices, never past the
// `usize` its directory promises, and its CRC-32 over what came out.
uLong InflatedCrc(const std::string& path, const std::string& name, const char* data,
                  uint64_t csize, uint64_t usize) {
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) Bad(path, "zlib failed");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  z.avail_in = static_cast<uInt>(std::min<uint64_t>(csize, UINT32_MAX));
  uLong sum = crc32(0L, Z_NULL, 0);
  uint64_t out = 0;
  unsigned char buf[1 << 16];
  for (int rc = Z_OK; rc != Z_STREAM_END;) {
    z.next_out = buf;
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) Bad(path, "entry " + name + " does not inflate");
    const uInt got = static_cast<uInt>(sizeof buf - z.avail_out);
    out += got;
    if (out > usize) Bad(path, "entry " + name + " inflates past its size");
    sum = crc32(sum, buf, got);
    if (rc == Z_OK && got == 0 && z.avail_in == 0) Bad(path, "entry " + name + " is cut short");
  }
  if (out != usize) Bad(path, "entry " + name + " inflates to another size than its own");
  return sum;
}

// Every entry: inside the file, stored (torch does not compress), its CRC-32 right.
void CheckEntries(const std::string& path, const std::string& b, size_t end) {
  uint64_t entries = Le(b, end + 10, 2), cd_size = Le(b, end + 12, 4), cd_at = Le(b, end + 16, 4);
  if (cd_at == 0xffffffff || entries == 0xffff) {  // zip64: the real figures are further back
    if (end < 20 || Le(b, end - 20, 4) != kEnd64LocatorSig) Bad(path, "its zip64 locator is gone");
    const uint64_t rec = Le(b, end - 12, 8);
    if (rec + 56 > end || Le(b, rec, 4) != kEnd64Sig) Bad(path, "its zip64 end record is gone");
    entries = Le(b, rec + 32, 8);
    cd_size = Le(b, rec + 40, 8);
    cd_at = Le(b, rec + 48, 8);
  }
  if (entries == 0) Bad(path, "the archive is empty");
  if (cd_at > b.size() || cd_size > b.size() - cd_at) {
    Bad(path, "truncated: its directory lies past the end of the file (" +
                  std::to_string(b.size()) + " bytes)");
  }
  size_t at = cd_at;
  for (uint64_t i = 0; i < entries; ++i) {
    if (at + 46 > b.size() || Le(b, at, 4) != kCentralSig)
      Bad(path, "its zip directory is damaged");
    const uint64_t method = Le(b, at + 10, 2), crc = Le(b, at + 16, 4);
    uint64_t csize = Le(b, at + 20, 4), usize = Le(b, at + 24, 4), local = Le(b, at + 42, 4);
    const size_t name_len = Le(b, at + 28, 2), extra_len = Le(b, at + 30, 2);
    const size_t comment_len = Le(b, at + 32, 2);
    if (at + 46 + name_len + extra_len + comment_len > b.size()) {
      Bad(path, "its zip directory is damaged");
    }
    const std::string name = b.substr(at + 46, name_len);
    // zip64 sizes and offset, in that order, for the fields that overflowed.
    for (size_t x = at + 46 + name_len; x + 4 <= at + 46 + name_len + extra_len;) {
      const uint64_t id = Le(b, x, 2), len = Le(b, x + 2, 2);
      size_t f = x + 4;
      if (id == 1) {
        for (uint64_t* field : {&usize, &csize, &local}) {
          if (*field == 0xffffffff && f + 8 <= x + 4 + len) {
            *field = Le(b, f, 8);
            f += 8;
          }
        }
      }
      x += 4 + len;
    }
    if (method != 0 && method != 8) {
      Bad(path, "entry " + name + " is compressed by method " + std::to_string(method) +
                    " (torch stores or deflates)");
    }
    if (method == 0 && csize != usize) Bad(path, "entry " + name + " is damaged (sizes differ)");
    if (local + 30 > b.size() || Le(b, local, 4) != kLocalSig) {
      Bad(path, "truncated or damaged: entry " + name + " has no local header");
    }
    const uint64_t data = local + 30 + Le(b, local + 26, 2) + Le(b, local + 28, 2);
    if (data > b.size() || csize > b.size() - data) {
      Bad(path, "truncated: entry " + name + " ends past the end of the file (" +
                    std::to_string(b.size()) + " bytes)");
    }
    const uLong sum = method == 0 ? Crc(b.data() + data, usize)
                                  : InflatedCrc(path, name, b.data() + data, csize, usize);
    if (sum != crc) {
      char got[16], want[16];
      std::snprintf(got, sizeof got, "%08lx", static_cast<unsigned long>(sum));
      std::snprintf(want, sizeof want, "%08lx", static_cast<unsigned long>(crc));
      Bad(path, "entry " + name + " fails its CRC-32 check (" + got + ", the archive says " + want +
                    "): the file is damaged");
    }
    at += 46 + name_len + extra_len + comment_len;
  }
}

std::string ReadRegularFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) Bad(path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    Bad(path, std::string("is not a regular file (") +
                  (S_ISFIFO(st.st_mode)   ? "a FIFO"
                   : S_ISDIR(st.st_mode)  ? "a directory"
                   : S_ISSOCK(st.st_mode) ? "a socket"
                                          : "a device") +
                  ")");
  }
  // O_NONBLOCK: should it have become a FIFO since the stat, the open does not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) Bad(path, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) Bad(path, "is not a regular file");
  if (st.st_size > kMaxCheckpointBytes) {
    Bad(path, "is " + std::to_string(st.st_size >> 20) + " MiB, more than a checkpoint of " +
                  std::to_string(kMaxCheckpointBytes >> 30) + " GiB can be");
  }
  std::string b(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < b.size()) {
    const ssize_t n = ::pread(fd, b.data() + got, b.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Bad(path, std::string("read failed: ") + std::strerror(errno));
    if (n == 0) break;  // shrank while read: the checks below find it truncated
    got += static_cast<size_t>(n);
  }
  b.resize(got);
  return b;
}

}  // namespace

std::string AttachManifest(std::string zip, const CheckpointManifest& manifest) {
  const size_t end = FindEnd(zip);
  if (end == std::string::npos || end + kEndSize != zip.size()) {
    throw Error(ErrorKind::kInternal, "checkpoint: torch wrote an archive dlaunch cannot read");
  }
  const std::string comment = kManifestTag + ManifestJson(manifest).dump();
  if (comment.size() > 65535) {
    throw Error(ErrorKind::kInternal, "checkpoint: the manifest is larger than a zip comment");
  }
  zip[end + 20] = static_cast<char>(comment.size() & 0xff);
  zip[end + 21] = static_cast<char>(comment.size() >> 8);
  return zip + comment;
}

CheckpointBytes ReadCheckpointFile(const std::string& path) {
  CheckpointBytes out;
  out.bytes = ReadRegularFile(path);
  const std::string& b = out.bytes;
  if (b.empty()) Bad(path, "is empty");
  if (b.size() < 4 || Le(b, 0, 4) != kLocalSig) {
    Bad(path, "is not a checkpoint (not a torch archive)");
  }
  const size_t end = FindEnd(b);
  if (end == std::string::npos) {
    Bad(path, "truncated: the archive's end record is missing (" + std::to_string(b.size()) +
                  " bytes; a write was cut short?)");
  }
  CheckEntries(path, b, end);
  const std::string comment = b.substr(end + kEndSize);
  if (comment.rfind(kManifestTag, 0) == 0) {
    out.manifest = ParseManifest(path, comment.substr(sizeof kManifestTag - 1));
  }
  return out;
}

std::string CheckpointMismatch(const CheckpointManifest& m, const ShapeKey& key,
                               int64_t per_rank_batch, int64_t global_batch) {
  auto known_differs = [](int64_t a, int64_t b) { return a != 0 && b != 0 && a != b; };
  if (m.key.model != key.model) {
    return "it was written for --model " + m.key.model + ", this run has " + key.model;
  }
  if (known_differs(m.key.feature_dim, key.feature_dim)) {
    return "its model takes " + std::to_string(m.key.feature_dim) + " values per sample, this " +
           "run's data has " + std::to_string(key.feature_dim);
  }
  if (known_differs(m.key.classes, key.classes)) {
    return "its model has " + std::to_string(m.key.classes) + " classes, this run " +
           std::to_string(key.classes);
  }
  if (known_differs(m.key.hidden, key.hidden)) {
    return "its model has --hidden " + std::to_string(m.key.hidden) + ", this run " +
           std::to_string(key.hidden);
  }
  if (m.per_rank_batch != per_rank_batch && (global_batch == 0 || m.global_batch != global_batch)) {
    return "it was written with " + std::to_string(m.per_rank_batch) +
           " samples per rank and step (--batch-size x --grad-accum) and a global batch of " +
           std::to_string(m.global_batch) + "; this run has " + std::to_string(per_rank_batch) +
           " per rank" +
           (global_batch ? " and " + std::to_string(global_batch) + " in all" : std::string()) +
           " (keep one of them to resume)";
  }
  return "";
}

ResumePoint MapResume(const CheckpointManifest& m, int64_t world_size, int64_t per_rank_batch,
                      int64_t steps_per_epoch, int64_t total_steps, int64_t steps_option) {
  ResumePoint r{m.step, total_steps, ""};
  const int64_t global = per_rank_batch * world_size;
  const bool keeps_total = steps_option > 0 && m.steps_option == steps_option && m.total_steps > 0;
  if (m.steps_per_epoch <= 0 || (m.world_size == world_size && m.global_batch == global &&
                                 m.steps_per_epoch == steps_per_epoch)) {
    if (keeps_total && m.steps_per_epoch > 0) r.total_steps = m.total_steps;
    return r;
  }
  int64_t epoch = m.step / m.steps_per_epoch;
  int64_t in_epoch = (m.step % m.steps_per_epoch) * m.global_batch / global;
  if (in_epoch >= steps_per_epoch) {  // the new epoch is shorter than what was done of the old
    ++epoch;
    in_epoch = 0;
  }
  r.step = epoch * steps_per_epoch + in_epoch;
  if (keeps_total) {
    const int64_t left = (m.total_steps - m.step) * m.global_batch;
    r.total_steps = r.step + (left + global - 1) / global;
  }
  r.total_steps = std::max(r.total_steps, r.step);
  auto n = [](int64_t v) { return std::to_string(v); };
  r.change = "resumed step " + n(m.step) + " of " + n(m.total_steps);
  if (m.world_size != world_size) {
    r.change += " with " + n(world_size) + " rank" + (world_size == 1 ? "" : "s") + " instead of " +
                n(m.world_size);
  }
  if (m.per_rank_batch == per_rank_batch && m.global_batch != global) {
    r.change += "; the per-rank batch is kept, so the global batch is now " + n(global) + " (was " +
                n(m.global_batch) + ")";
  } else if (m.global_batch == global && m.per_rank_batch != per_rank_batch) {
    r.change += "; the global batch " + n(global) + " is kept (" + n(per_rank_batch) +
                " per rank instead of " + n(m.per_rank_batch) + ")";
  }
  r.change += "; this run goes on at step " + n(r.step) + " of " + n(r.total_steps);
  return r;
}

int RemoveStaleCheckpointTemps(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  const std::string prefix = "checkpoint.pt.tmp.";
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    char* rest = nullptr;
    const long pid = std::strtol(name.c_str() + prefix.size(), &rest, 10);
    // Our own pid is stale too: this process is not writing (a killed writer's pid came back).
    const bool alive = pid > 0 && *rest == '\0' && pid != ::getpid() &&
                       (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
    if (!alive && ::unlink((dir + "/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

void WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  auto fail = [&](const std::string& what) {
    const int saved = errno;
    ::unlink(tmp.c_str());
    throw Error(ErrorKind::kInternal,
                "checkpoint: writing " + path + " failed: " + what + ": " + std::strerror(saved));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fail("open " + tmp);
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      fail("write");
    }
    done += static_cast<size_t>(n);
  }
  // Durable before the rename: otherwise a power cut could leave the new name on empty data.
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail("fsync");
  }
  if (::close(fd) != 0) fail("close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename");
  const std::string dir = path.substr(0, path.find_last_of('/') + 1);
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // the rename itself survives a crash
    ::close(dfd);
  }
}

}  // namespace dlaunch::worker
