#include "worker/preflight/bus_bandwidth.h"

#include <algorithm>

#include "core/error.h"

namespace dlaunch::worker {

double BusBwFactor(const std::string& op, int world_size) {
  const double n = world_size;
  if (op == "allreduce") return 2.0 * (n - 1) / n;
  if (op == "reduce_scatter" || op == "allgather" || op == "alltoall") return (n - 1) / n;
  if (op == "broadcast" || op == "reduce" || op == "sendrecv") return 1.0;
  throw UsageError("no bus bandwidth factor for op '" + op + "'");
}

double AlgBwGBps(size_t bytes, double seconds) {
  if (seconds <= 0) return 0;
  return static_cast<double>(bytes) / 1e9 / seconds;
}

std::vector<size_t> SweepSizes(size_t min_bytes, size_t max_bytes, size_t factor) {
  std::vector<size_t> sizes;
  if (factor < 2) factor = 2;
  for (size_t s = std::max<size_t>(min_bytes, 1); s <= max_bytes; s *= factor) {
    sizes.push_back(s);
    if (s > max_bytes / factor) break;  // the next step would overflow or pass max
  }
  return sizes;
}

size_t OpElementCount(const std::string& op, size_t bytes, size_t type_size, int world_size) {
  size_t count = bytes / type_size;
  if (op == "allgather" || op == "reduce_scatter" || op == "alltoall") {
    size_t per_rank = std::max<size_t>(count / world_size, 1);
    return per_rank * world_size;
  }
  return std::max<size_t>(count, 1);
}

}  // namespace dlaunch::worker
