#include "launcher/rendezvous/push_quota.h"

#include <algorithm>

#include "core/base/format.h"

namespace dlaunch::launcher {

PushQuota::PushQuota(PushLimits limits) : limits_(limits) {}

std::string PushQuota::Admit(int node_rank, const v1::FileChunk& chunk) {
  const auto key = std::make_pair(chunk.rank(), chunk.name());
  auto it = end_.find(key);
  if (it == end_.end() && files_[chunk.rank()] >= limits_.files_per_rank) {
    return "rank " + std::to_string(chunk.rank()) + " pushed more than the " +
           std::to_string(limits_.files_per_rank) + " files a rank folder may hold";
  }
  const int64_t before = it == end_.end() ? 0 : it->second;
  // (CheckFileChunk bounds offset and size, so the sum cannot overflow.)
  const int64_t end = std::max(before, chunk.offset() + static_cast<int64_t>(chunk.data().size()));
  int64_t& bytes = bytes_[node_rank];
  if (bytes - before + end > limits_.bytes_per_node) {
    return "node " + std::to_string(node_rank) + " pushed more than the " +
           base::FormatBytes(limits_.bytes_per_node) + " its rank folders may hold";
  }
  bytes += end - before;
  if (it == end_.end()) {
    ++files_[chunk.rank()];
    end_[key] = end;
  } else {
    it->second = end;
  }
  return "";
}

void PushQuota::Clear() {
  end_.clear();
  files_.clear();
  bytes_.clear();
}

}  // namespace dlaunch::launcher
