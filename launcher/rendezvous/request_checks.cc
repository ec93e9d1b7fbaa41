#include "launcher/rendezvous/request_checks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/base/unique_fd.h"
#include "core/error.h"

namespace dlaunch::launcher {
namespace {

[[noreturn]] void Refuse(const std::string& why) { throw Error(ErrorKind::kInvalidArgument, why); }

}  // namespace

bool RankInWorld(int rank, const JobShape& shape) { return rank >= 0 && rank < shape.world_size; }

bool RankOfNode(int rank, const JobShape& shape, int node_rank) {
  return RankInWorld(rank, shape) && shape.nproc_per_node > 0 &&
         rank / shape.nproc_per_node == node_rank;
}

void CheckRankInWorld(int rank, const JobShape& shape, const char* what) {
  if (!RankInWorld(rank, shape)) {
    Refuse(std::string(what) + " for rank " + std::to_string(rank) + " outside the world of " +
           std::to_string(shape.world_size));
  }
}

void CheckFileChunk(const v1::FileChunk& chunk, const JobShape& shape, int sender) {
  CheckRankInWorld(chunk.rank(), shape, "file");
  if (shape.nnodes < 2 || sender <= 0 || sender >= shape.nnodes ||
      !RankOfNode(chunk.rank(), shape, sender)) {
    Refuse("file for rank " + std::to_string(chunk.rank()) +
           ": only a registered agent node pushes its own ranks' files");
  }
  const std::string& name = chunk.name();
  if (name.empty() || name.size() > 255 || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos || name == "." || name == "..") {
    Refuse("bad file name '" + name.substr(0, 64) + "'");
  }
  const int64_t size = static_cast<int64_t>(chunk.data().size());
  if (chunk.offset() < 0 || chunk.offset() > kMaxPushedFileBytes - size) {
    Refuse("file chunk at offset " + std::to_string(chunk.offset()) + " beyond the " +
           std::to_string(kMaxPushedFileBytes >> 30) + " GiB a pushed file may hold");
  }
}

void WritePushedChunk(const v1::FileChunk& chunk, const std::string& run_dir) {
  const std::string dir = run_dir + "/rank" + std::to_string(chunk.rank());
  ::mkdir(dir.c_str(), 0700);
  base::UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (d.get() < 0) {
    throw Error(ErrorKind::kInternal, "cannot open " + dir + ": " + std::strerror(errno));
  }
  // A whole version is written aside, under a name every reader skips, and put in place whole.
  const std::string aside = chunk.name() + ".tmp.push";
  if (chunk.removed()) {
    ::unlinkat(d.get(), chunk.name().c_str(), 0);
    ::unlinkat(d.get(), aside.c_str(), 0);
    return;
  }
  const std::string& target = chunk.whole() ? aside : chunk.name();
  const bool anew = chunk.whole() ? chunk.offset() == 0 : chunk.truncate();
  const int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (anew ? O_TRUNC : 0);
  base::UniqueFd f(::openat(d.get(), target.c_str(), flags, 0600));
  struct stat st {};
  if (f.get() < 0 || ::fstat(f.get(), &st) != 0) {
    throw Error(ErrorKind::kInternal,
                "cannot write " + dir + "/" + target + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) Refuse(dir + "/" + target + " is not a regular file");
  if (chunk.offset() > st.st_size) {
    Refuse("file chunk at offset " + std::to_string(chunk.offset()) + " past the end (" +
           std::to_string(st.st_size) + " bytes) of " + dir + "/" + target);
  }
  const std::string& data = chunk.data();
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(f.get(), data.data() + done, data.size() - done,
                         chunk.offset() + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Error(ErrorKind::kInternal,
                  "cannot write " + dir + "/" + target + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  if (chunk.whole() && chunk.last()) {
    // The version ends here: a longer earlier try of the same version must not leave its tail.
    const off_t end = chunk.offset() + static_cast<off_t>(data.size());
    if (::ftruncate(f.get(), end) != 0 ||
        ::renameat(d.get(), aside.c_str(), d.get(), chunk.name().c_str()) != 0) {
      throw Error(ErrorKind::kInternal,
                  "cannot put " + dir + "/" + chunk.name() + " in place: " + std::strerror(errno));
    }
  }
}

}  // namespace dlaunch::launcher
