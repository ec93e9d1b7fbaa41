// How much a node agent may push into node 0's run directory per attempt: its ranks' folders
// hold what their ranks wrote, and a rank can write anything there (300 files, or one of 16 GiB),
// so node 0 keeps at most so many files a rank and so many bytes a node. Plain logic; the
// coordinator holds it under its lock.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "dlaunch.pb.h"

namespace dlaunch::launcher {

struct PushLimits {
  int files_per_rank = 64;                     // a rank folder holds about 20 kinds of file
  int64_t bytes_per_node = int64_t{64} << 30;  // every file of every rank of the node
};

class PushQuota {
 public:
  explicit PushQuota(PushLimits limits = {});

  // Whether node `node_rank`'s chunk still fits: its file is one of the first files_per_rank
  // names of its rank, and the node's files stay within bytes_per_node (a file counts with the
  // furthest byte ever pushed to it, so a file sent again whole costs nothing more). Records it
  // when it fits; "" then, else the bound it passes, one line.
  std::string Admit(int node_rank, const v1::FileChunk& chunk);
  // A new attempt: the rank folders were put away and are pushed anew.
  void Clear();

 private:
  PushLimits limits_;
  std::map<std::pair<int, std::string>, int64_t> end_;  // (rank, name) -> furthest byte
  std::map<int, int> files_;                            // by rank
  std::map<int, int64_t> bytes_;                        // by node rank
};

}  // namespace dlaunch::launcher
