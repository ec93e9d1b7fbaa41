#include "ddp/bucket_plan.h"

namespace dlaunch::ddp {

std::vector<Bucket> PlanBuckets(const std::vector<size_t>& param_elements, size_t element_bytes,
                                size_t cap_bytes) {
  std::vector<Bucket> buckets;
  Bucket current;
  for (size_t i = param_elements.size(); i-- > 0;) {
    if (!current.params.empty() &&
        (current.elements + param_elements[i]) * element_bytes > cap_bytes) {
      buckets.push_back(std::move(current));
      current = Bucket();
    }
    current.params.push_back(i);
    current.offsets.push_back(current.elements);
    current.elements += param_elements[i];
  }
  if (!current.params.empty()) buckets.push_back(std::move(current));
  return buckets;
}

}  // namespace dlaunch::ddp
