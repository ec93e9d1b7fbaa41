#include "worker/train/distributed_sampler.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace dlaunch::worker {

DistributedSampler::DistributedSampler(int64_t data_size, int rank, int world_size, uint64_t seed)
    : data_size_(data_size),
      rank_(rank),
      world_size_(world_size),
      seed_(seed),
      per_rank_((data_size + world_size - 1) / world_size) {}

std::vector<int64_t> DistributedSampler::Indices(int64_t epoch) const {
  std::vector<int64_t> perm(data_size_);
  std::iota(perm.begin(), perm.end(), 0);
  // Our own Fisher-Yates over mt19937_64: std::shuffle's output is not specified by the standard,
  // and every rank (and a resumed run) must draw the same permutation.
  std::mt19937_64 rng(seed_ + static_cast<uint64_t>(epoch) * 1000003ull);
  for (int64_t i = data_size_ - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(perm[i], perm[j]);
  }
  int64_t total = per_rank_ * world_size_;
  for (int64_t i = data_size_; i < total; ++i) perm.push_back(perm[i - data_size_]);
  std::vector<int64_t> mine;
  mine.reserve(per_rank_);
  for (int64_t i = rank_; i < total; i += world_size_) mine.push_back(perm[i]);
  return mine;
}

Shard EvalShard(int64_t size, int rank, int world_size) {
  const int64_t base = size / world_size, extra = size % world_size;
  Shard s;
  s.begin = rank * base + std::min<int64_t>(rank, extra);
  s.end = s.begin + base + (rank < extra ? 1 : 0);
  return s;
}

}  // namespace dlaunch::worker
