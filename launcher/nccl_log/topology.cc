// Per-node topology and the rank x rank transport matrix, both read off the parsed ranks.
#include <algorithm>
#include <set>

#include "launcher/nccl_log/report.h"

namespace dlaunch::launcher::nccl_log {

namespace {

constexpr int kMaxMatrix = 1024;

// "NET/0", "NET/0-1", "Socket/0" -> the index NCCL gave the NIC (its position in "Using [i]").
int NicIndex(const std::string& nic) {
  size_t end = nic.size();
  size_t b = end;
  while (b > 0 && nic[b - 1] >= '0' && nic[b - 1] <= '9') --b;
  if (b == end) return -1;
  return std::stoi(nic.substr(b, std::min<size_t>(end - b, 6)));
}

std::string Label(const Link& l) {
  switch (l.transport) {
    case Transport::kP2P:
      return "P2P";
    case Transport::kShm:
      return "SHM";
    case Transport::kNetIb:
      return l.gdr ? "IB/GDR" : "IB";
    case Transport::kNetSocket:
      return "SOCK";
    case Transport::kNetOther:
      return l.net.substr(0, l.net.find(' ')) + (l.gdr ? "/GDR" : "");
    default:
      return "";
  }
}

}  // namespace

std::vector<NodeTopology> SummarizeTopology(const ParseResult& parsed) {
  std::vector<NodeTopology> nodes;
  for (const RankLog& r : parsed.ranks) {
    auto it = std::find_if(nodes.begin(), nodes.end(),
                           [&](const NodeTopology& n) { return n.host == r.host; });
    if (it == nodes.end()) {
      nodes.emplace_back();
      it = nodes.end() - 1;
      it->host = r.host;
    }
    NodeTopology& n = *it;
    if (r.rank >= 0) n.ranks.push_back(r.rank);
    if (n.network.empty()) n.network = r.network;
    const std::vector<NetInterface>& nics = !r.ib.empty() ? r.ib : r.socket;
    if (n.nics.empty()) n.nics = nics;
    if (n.bootstrap.empty()) n.bootstrap = r.bootstrap;
    if (r.gdr >= 0) n.gdr = std::max(n.gdr, r.gdr);
    GpuTopology g;
    g.rank = r.rank;
    g.cuda_dev = r.cuda_dev;
    g.bus_id = r.bus_id;
    for (NicDistance d : r.nic_distance) {
      int i = NicIndex(d.nic);
      if (i >= 0 && i < static_cast<int>(n.nics.size())) d.nic = n.nics[i].name;
      g.nics.push_back(std::move(d));
    }
    n.gpus.push_back(std::move(g));
  }
  for (NodeTopology& n : nodes) std::sort(n.ranks.begin(), n.ranks.end());
  return nodes;
}

TransportMatrix BuildTransportMatrix(const ParseResult& parsed) {
  TransportMatrix m;
  int world = 0;
  for (const RankLog& r : parsed.ranks) {
    if (const CommRecord* c = MainComm(r)) world = std::max(world, c->nranks);
  }
  if (world <= 1 || world > kMaxMatrix) return m;
  std::vector<std::vector<std::set<std::string>>> seen(world,
                                                       std::vector<std::set<std::string>>(world));
  bool any = false;
  for (const RankLog& r : parsed.ranks) {
    for (const CommRecord& c : r.comms) {
      if (c.nranks != world) continue;
      for (const Link& l : c.links) {
        std::string label = Label(l);
        if (label.empty() || l.src < 0 || l.dst < 0 || l.src >= world || l.dst >= world) continue;
        seen[l.src][l.dst].insert(label);
        any = true;
      }
    }
  }
  if (!any) return m;
  m.size = world;
  m.cells.assign(world, std::vector<std::string>(world));
  for (int a = 0; a < world; ++a) {
    for (int b = 0; b < world; ++b) {
      for (const std::string& s : seen[a][b])
        m.cells[a][b] += (m.cells[a][b].empty() ? "" : "+") + s;
    }
  }
  return m;
}

}  // namespace dlaunch::launcher::nccl_log
