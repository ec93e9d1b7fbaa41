// A tmpfs mounted over a test's folder, to fill up: the full disk of the durability and
// many-node tests. Mounting needs root (CAP_SYS_ADMIN); Mount says when it cannot.
#pragma once

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/base/unique_fd.h"

namespace dlaunch::testing {

class TinyDisk {
 public:
  TinyDisk() = default;
  TinyDisk(const TinyDisk&) = delete;
  TinyDisk& operator=(const TinyDisk&) = delete;
  ~TinyDisk() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }

  // Mounts a tmpfs of `size` ("4m") over `dir`, created if missing; "" on success, else why not.
  std::string Mount(const std::filesystem::path& dir, const std::string& size) {
    dir_ = dir;
    std::filesystem::create_directories(dir_);
    const std::string options = "size=" + size;
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      return "cannot mount a tmpfs (needs root): " + std::string(std::strerror(errno));
    }
    mounted_ = true;
    return "";
  }

  // Fills the disk up to `leave` bytes of room (0: to the last byte) with a new file; false when
  // the file cannot be made.
  bool Fill(uint64_t leave = 0) {
    const std::filesystem::path path = dir_ / ("filler" + std::to_string(fillers_++));
    base::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    struct statvfs st {};
    if (!fd || ::statvfs(dir_.c_str(), &st) != 0) return false;
    const uint64_t room = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
    const std::string block(1 << 16, 'x');
    uint64_t todo = room > leave ? room - leave : 0;
    while (todo > 0) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(todo, block.size()));
      if (::write(fd.get(), block.data(), n) != static_cast<ssize_t>(n)) break;
      todo -= n;
    }
    if (leave > 0) return true;
    for (size_t n = block.size(); n > 0; n /= 16) {
      while (::write(fd.get(), block.data(), n) == static_cast<ssize_t>(n)) {
      }
    }
    return true;
  }

 private:
  std::filesystem::path dir_;
  bool mounted_ = false;
  int fillers_ = 0;
};

}  // namespace dlaunch::testing
