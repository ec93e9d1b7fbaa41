// A node's rank files as node 0 must see them. Each call compares every file of the rank folders
// with what was last sent of it and sends what node 0 lacks: the bytes an append-only file (a
// log, events.jsonl) gained, a whole new version of a file that was rewritten in place, replaced
// by rename or truncated (flight_tail.jsonl, heartbeat.json, flight.json), and the removal of a
// file that is gone. Node 0 puts a whole version in place only once it has all of it, so its
// copy is always one version of the file, whole.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "dlaunch.pb.h"

namespace dlaunch::launcher {

class RankFilePusher {
 public:
  // Sends one chunk; false when it did not arrive (the rest waits for the next Push).
  using Send = std::function<bool(const v1::FileChunk&)>;
  explicit RankFilePusher(Send send) : send_(std::move(send)) {}

  enum class Check {
    // A file of up to 256 KiB is compared by content (a file written through a shared mapping,
    // as the Python agent writes its flight tail, keeps its times until the kernel writes the
    // pages back); a larger one whose inode, size and times are unchanged is taken as unchanged,
    // and an append is recognised by the first and last 4 KiB of what was sent: cheap enough for
    // every tick.
    kQuick,
    // Every file's content is compared with what was sent (files up to 16 MiB): before node 0
    // judges the attempt, when a change within one clock tick must not be missed.
    kThorough,
  };

  // Brings node 0's copies of the files in `rank_dirs` (rank -> folder) up to date. Blocks for
  // the sends; returns false when one failed. Thread-safe.
  bool Push(const std::map<int, std::string>& rank_dirs, Check check = Check::kQuick);

  // The next Push sends every file whole: the folders were put away for a new attempt.
  void Forget();

 private:
  struct Sent {
    ino_t inode = 0;
    int64_t size = 0;
    int64_t mtime_ns = 0;
    int64_t ctime_ns = 0;
    uint32_t crc = 0;        // of all `size` bytes sent
    std::string head, tail;  // their first and last 4 KiB
    // Its times were within a clock tick of when it was read: a write since may have left them
    // as they were (git's "racy" index entries), so its content is compared until that is over.
    bool racy = false;
    int rank = 0;
    std::string name;
  };

  // Sends `path` from `from` (0: a whole version); updates `sent` once all of it arrived.
  bool SendFile(int rank, const std::string& name, const std::string& path, int64_t from,
                Sent* sent);

  Send send_;
  std::mutex mu_;
  std::map<std::string, Sent> sent_;  // by path
};

}  // namespace dlaunch::launcher
