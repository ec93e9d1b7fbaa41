#include "launcher/rendezvous/store_quota.h"

#include <algorithm>

#include "core/base/format.h"

namespace dlaunch::launcher {

StoreQuota::StoreQuota(StoreLimits limits) : limits_(limits) {}

std::string StoreQuota::Check(int rank, const std::string& key, int64_t value_bytes) const {
  if (rank == kLauncher) return "";
  // A counter's value (at most kCounterBytes) always fits.
  if (value_bytes > std::max(limits_.value_bytes, kCounterBytes)) {
    return "a store value may hold at most " + base::FormatBytes(limits_.value_bytes) + "; rank " +
           std::to_string(rank) + "'s holds " + base::FormatBytes(value_bytes);
  }
  // What the rank's writes would hold once `key` is its own: less what the key holds now when
  // it is the rank's already.
  auto it = entries_.find(key);
  const bool mine = it != entries_.end() && it->second.rank == rank;
  if (keys(rank) + (mine ? 0 : 1) > limits_.keys_per_rank) {
    return "rank " + std::to_string(rank) + " holds the " + std::to_string(limits_.keys_per_rank) +
           " store keys a rank may hold";
  }
  const int64_t held =
      bytes(rank) - (mine ? it->second.bytes : 0) + static_cast<int64_t>(key.size()) + value_bytes;
  if (held > limits_.bytes_per_rank) {
    return "rank " + std::to_string(rank) + "'s store keys and values would pass the " +
           base::FormatBytes(limits_.bytes_per_rank) + " a rank may store";
  }
  return "";
}

void StoreQuota::Record(int rank, const std::string& key, int64_t value_bytes) {
  auto [it, added] = entries_.try_emplace(key);
  Entry& entry = it->second;
  if (!added) {
    // The key's earlier write no longer counts for its writer.
    bytes_[entry.rank] -= entry.bytes;
    --keys_[entry.rank];
  }
  entry.rank = rank;
  entry.bytes = static_cast<int64_t>(key.size()) + value_bytes;
  bytes_[rank] += entry.bytes;
  ++keys_[rank];
}

void StoreQuota::Clear() {
  entries_.clear();
  bytes_.clear();
  keys_.clear();
}

int64_t StoreQuota::bytes(int rank) const {
  auto it = bytes_.find(rank);
  return it == bytes_.end() ? 0 : it->second;
}

int64_t StoreQuota::keys(int rank) const {
  auto it = keys_.find(rank);
  return it == keys_.end() ? 0 : it->second;
}

}  // namespace dlaunch::launcher
