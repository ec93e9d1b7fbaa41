#include "core/comm/host_topology.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>

#include "core/base/proc.h"
#include "core/error.h"

namespace dlaunch::core {

int HostTopology::HostOf(int rank) const {
  for (size_t h = 0; h < hosts.size(); ++h) {
    if (std::find(hosts[h].begin(), hosts[h].end(), rank) != hosts[h].end())
      return static_cast<int>(h);
  }
  throw Error(ErrorKind::kInternal, "rank " + std::to_string(rank) + " is on no host");
}

int HostTopology::LocalIndex(int rank) const {
  const std::vector<int>& h = hosts[HostOf(rank)];
  return static_cast<int>(std::find(h.begin(), h.end(), rank) - h.begin());
}

size_t HostTopology::MaxLocalSize() const {
  size_t m = 0;
  for (const auto& h : hosts) m = std::max(m, h.size());
  return m;
}

bool HostTopology::AnyShared() const { return MaxLocalSize() > 1; }

std::string LocalHostId(const std::string& override_id) {
  if (!override_id.empty()) return override_id;
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  const char* node = std::getenv("GROUP_RANK");
  return base::Hostname() + "/" + boot + "/node" + (node && *node ? node : "0");
}

HostTopology ExchangeTopology(Store& store, int rank, int size, const std::string& host_id,
                              std::chrono::milliseconds timeout) {
  auto key = [](int r) { return "topology/" + std::to_string(r); };
  store.Set(key(rank), host_id);
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(key(r));
  store.Wait(keys, timeout);
  std::map<std::string, int> host_index;
  HostTopology topo;
  for (int r = 0; r < size; ++r) {
    const std::string id = r == rank ? host_id : store.Get(key(r), timeout);
    auto [it, fresh] = host_index.emplace(id, static_cast<int>(topo.hosts.size()));
    if (fresh) topo.hosts.emplace_back();
    topo.hosts[it->second].push_back(r);
  }
  topo.host = topo.HostOf(rank);
  topo.local_rank = topo.LocalIndex(rank);
  return topo;
}

}  // namespace dlaunch::core
