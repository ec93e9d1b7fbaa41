// Slurm's compressed lists, as its variables spell them. Pure.
#pragma once

#include <string>
#include <vector>

namespace dlaunch::launcher::cluster {

// Host lists: "gpu[01-04,07],cpu9" -> gpu01 gpu02 gpu03 gpu04 gpu07 cpu9. Throws UsageError for a
// malformed list.
std::vector<std::string> ExpandSlurmNodelist(const std::string& list);

// Per-node counts: "2(x3),1" -> 2 2 2 1. Throws UsageError.
std::vector<int> ExpandSlurmCounts(const std::string& list);

}  // namespace dlaunch::launcher::cluster
