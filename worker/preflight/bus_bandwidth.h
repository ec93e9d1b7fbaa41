// nccl-tests' arithmetic: which sizes a sweep visits, how many elements each op moves, and how
// algorithm bandwidth converts into bus bandwidth (the number comparable across world sizes).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dlaunch::worker {

// busbw = algbw x factor: allreduce 2(n-1)/n; reduce_scatter, allgather, alltoall (n-1)/n;
// broadcast, reduce, sendrecv 1. Throws UsageError for an unknown op.
double BusBwFactor(const std::string& op, int world_size);

// GB/s (1e9 bytes per second) for `bytes` moved in `seconds`; 0 when seconds <= 0.
double AlgBwGBps(size_t bytes, double seconds);

// min, min*f, min*f^2, ... up to max inclusive (nccl-tests -b/-e/-f).
std::vector<size_t> SweepSizes(size_t min_bytes, size_t max_bytes, size_t factor);

// Total elements (nccl-tests' "count" column) for a requested size: ops that split the buffer
// into world_size blocks round down to a multiple of world_size, with at least one per rank.
size_t OpElementCount(const std::string& op, size_t bytes, size_t type_size, int world_size);

}  // namespace dlaunch::worker
