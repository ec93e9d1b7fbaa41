// Which ranks share a host, agreed through the job's store: the shared-memory transport joins the
// ranks of one host and leaves the links between hosts to gloo's TCP transport.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/store.h"

namespace dlaunch::core {

struct HostTopology {
  // World ranks of every host, ascending; hosts ordered by their lowest rank.
  std::vector<std::vector<int>> hosts;
  int host = 0;        // this rank's host
  int local_rank = 0;  // index of this rank in hosts[host]; 0 is the host's leader

  int local_size() const { return static_cast<int>(hosts[host].size()); }
  bool leader() const { return local_rank == 0; }
  int HostOf(int rank) const;
  int LocalIndex(int rank) const;  // index of `rank` within its host
  size_t MaxLocalSize() const;
  // True when some host has two or more ranks, i.e. shared memory has a link to serve.
  bool AnyShared() const;
};

// This process's host identity: `override_id` when set (tests simulate hosts with it), else the
// host name, the kernel's boot id and the launcher's node rank (GROUP_RANK), so that two
// launchers acting as two nodes on one machine stay two hosts.
std::string LocalHostId(const std::string& override_id);

// Publishes host_id under "topology/<rank>" and reads every rank's. Blocks for all of them, at
// most `timeout`; throws Error(kTimeout) naming the absent ranks' keys.
HostTopology ExchangeTopology(Store& store, int rank, int size, const std::string& host_id,
                              std::chrono::milliseconds timeout);

}  // namespace dlaunch::core
