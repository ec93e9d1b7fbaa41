// How DistributedDataParallel groups gradients into buckets (torch-free, pure logic).
#pragma once

#include <cstddef>
#include <vector>

namespace dlaunch::ddp {

struct Bucket {
  std::vector<size_t> params;   // parameter indices, in the order they sit in the flat buffer
  std::vector<size_t> offsets;  // element offset of each parameter in the flat buffer
  size_t elements = 0;
};

// Walks the parameters in reverse registration order (backward produces the last layer's gradients
// first) and starts a new bucket when the next parameter would push the current one past
// `cap_bytes`; a parameter larger than the cap gets a bucket of its own. Every parameter lands in
// exactly one bucket; bucket 0 holds the last parameters. Does not block.
std::vector<Bucket> PlanBuckets(const std::vector<size_t>& param_elements, size_t element_bytes,
                                size_t cap_bytes);

}  // namespace dlaunch::ddp
