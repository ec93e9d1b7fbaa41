// Which path each pair of ranks' collectives and send/recv took (shared memory, TCP, NCCL),
// gathered from every rank: what preflight reports next to its bandwidth tables.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/comm/communicator.h"

namespace dlaunch::core {

struct LinkPaths {
  // [src][dst]: "shm", "tcp" or "nccl"; send/recv between two ranks take the same path as
  // their collectives.
  std::vector<std::vector<std::string>> collectives;

  // "shm 0-1 2-3; tcp 0-2 0-3 1-2 1-3": pairs grouped by path, at most 24 each.
  std::string Summary() const;
  nlohmann::json ToJson() const;
};

// Collective over `comm` (an allgather of one byte per peer): every rank must call it. Blocks for
// at most `timeout`.
LinkPaths GatherLinkPaths(Communicator& comm, std::chrono::milliseconds timeout);

}  // namespace dlaunch::core
