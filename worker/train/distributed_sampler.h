// Which samples each rank sees, as PyTorch's DistributedSampler: every epoch one shuffled
// permutation (seeded by seed + epoch, the same on every rank), padded to a multiple of the world
// size, and rank r takes positions r, r + N, r + 2N, ... So the ranks' shards are disjoint within
// an epoch, and N ranks with batch b see at step s exactly the samples that 1 rank with batch N*b
// sees.
#pragma once

#include <cstdint>
#include <vector>

namespace dlaunch::worker {

class DistributedSampler {
 public:
  DistributedSampler(int64_t data_size, int rank, int world_size, uint64_t seed);

  // Sample indices of this rank for `epoch`. Does not block.
  std::vector<int64_t> Indices(int64_t epoch) const;
  int64_t samples_per_rank() const { return per_rank_; }

 private:
  int64_t data_size_;
  int rank_;
  int world_size_;
  uint64_t seed_;
  int64_t per_rank_;
};

// Rank `rank`'s part of an evaluation over `size` samples: contiguous, disjoint, together exactly
// the whole set (no padding, so no sample is counted twice); sizes differ by at most one.
struct Shard {
  int64_t begin = 0, end = 0;
};
Shard EvalShard(int64_t size, int rank, int world_size);

}  // namespace dlaunch::worker
