// Analyze() and the renderers: the text report and the "dlaunch.nccl/1" JSON.
#include "launcher/nccl_log/report.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "core/base/format.h"

namespace dlaunch::launcher::nccl_log {

namespace {

std::string Interfaces(const std::vector<NetInterface>& list) {
  std::string out;
  for (size_t i = 0; i < list.size(); ++i) {
    out += (i ? " " : "") + list[i].name + (list[i].address.empty() ? "" : ":" + list[i].address);
  }
  return out;
}

nlohmann::json InterfacesJson(const std::vector<NetInterface>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const NetInterface& i : list) out.push_back({{"name", i.name}, {"address", i.address}});
  return out;
}

nlohmann::json DistancesJson(const std::vector<NicDistance>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const NicDistance& d : list) out.push_back({{"nic", d.nic}, {"path", d.path}});
  return out;
}

const char* GdrWord(int gdr) { return gdr == 1 ? "on" : gdr == 0 ? "off" : "unknown"; }

nlohmann::json RankJson(const RankLog& r) {
  nlohmann::json comms = nlohmann::json::array();
  for (const CommRecord& c : r.comms) {
    nlohmann::json links = nlohmann::json::array();
    for (const Link& l : c.links) {
      links.push_back({{"src", l.src},
                       {"dst", l.dst},
                       {"direction", l.direction},
                       {"via", l.via},
                       {"transport", TransportName(l.transport)},
                       {"gdr", l.gdr},
                       {"channels", l.channels}});
    }
    nlohmann::json rings = nlohmann::json::object();
    for (const auto& [ch, order] : c.rings) rings[std::to_string(ch)] = order;
    comms.push_back({{"ptr", c.ptr},
                     {"rank", c.rank},
                     {"nranks", c.nranks},
                     {"nnodes", c.nnodes},
                     {"comm_id", c.comm_id},
                     {"complete", c.complete},
                     {"aborted", c.aborted},
                     {"destroyed", c.destroyed},
                     {"step", InitStepName(c.step)},
                     {"links", links},
                     {"rings", rings},
                     {"trees", c.trees}});
  }
  return {{"rank", r.rank},
          {"nranks", r.nranks},
          {"host", r.host},
          {"pid", r.pid},
          {"cuda_dev", r.cuda_dev},
          {"bus_id", r.bus_id},
          {"source", r.source},
          {"version", r.version},
          {"cuda_version", r.cuda_version},
          {"bootstrap", InterfacesJson(r.bootstrap)},
          {"socket", InterfacesJson(r.socket)},
          {"ib", InterfacesJson(r.ib)},
          {"ib_oob", r.ib_oob},
          {"ib_no_device", r.ib_no_device},
          {"network", r.network},
          {"net_plugin", r.net_plugin},
          {"gdr", GdrWord(r.gdr)},
          {"env", r.env},
          {"nic_distance", DistancesJson(r.nic_distance)},
          {"step", InitStepName(r.step)},
          {"step_line", r.step_line},
          {"warnings", r.warnings},
          {"warning_count", r.warning_count},
          {"comms", comms}};
}

}  // namespace

NcclReport Analyze(ParseResult parsed, const AnalyzeOptions& options) {
  NcclReport report;
  report.verdicts = FindVerdicts(parsed, options);
  report.nodes = SummarizeTopology(parsed);
  report.transports = BuildTransportMatrix(parsed);
  report.parsed = std::move(parsed);
  return report;
}

std::string RankLabel(const RankLog& r) {
  if (r.rank >= 0)
    return "rank " + std::to_string(r.rank) + (r.host.empty() ? "" : " (" + r.host + ")");
  std::string s = r.host.empty() ? r.source : r.host;
  if (r.pid >= 0) s += " pid " + std::to_string(r.pid);
  if (r.cuda_dev >= 0) s += " dev " + std::to_string(r.cuda_dev);
  return s;
}

std::vector<std::string> FormatVerdicts(const std::vector<Verdict>& verdicts) {
  std::vector<std::string> out;
  for (const Verdict& v : verdicts) {
    out.push_back(std::string(v.severity == "error" ? "✗ " : "! ") + "NCCL " + v.kind + ": " +
                  v.message);
    out.push_back("    fix: " + v.fix);
    for (size_t i = 0; i < v.evidence.size() && i < 4; ++i) out.push_back("    " + v.evidence[i]);
    if (v.evidence.size() > 4) {
      out.push_back("    ... " + std::to_string(v.evidence.size() - 4) + " more");
    }
  }
  return out;
}

std::string FormatTopology(const std::vector<NodeTopology>& nodes) {
  std::ostringstream out;
  for (const NodeTopology& n : nodes) {
    out << (n.host.empty() ? "(unknown host)" : n.host) << ":";
    if (!n.ranks.empty()) out << " " << base::NameRanks(n.ranks);
    if (!n.network.empty()) out << ", network " << n.network;
    if (!n.nics.empty()) out << ", NICs " << Interfaces(n.nics);
    if (!n.bootstrap.empty()) out << ", bootstrap " << Interfaces(n.bootstrap);
    if (n.gdr >= 0) out << ", GDR " << GdrWord(n.gdr);
    out << "\n";
    for (const GpuTopology& g : n.gpus) {
      if (g.cuda_dev < 0 && g.bus_id.empty() && g.nics.empty()) continue;
      out << "  " << (g.rank >= 0 ? "rank " + std::to_string(g.rank) : std::string("rank ?"));
      if (g.cuda_dev >= 0) out << ": CUDA dev " << g.cuda_dev;
      if (!g.bus_id.empty()) out << ", bus " << g.bus_id;
      if (!g.nics.empty()) {
        out << ", NIC distance:";
        for (const NicDistance& d : g.nics) out << " " << d.nic << " " << d.path;
      }
      out << "\n";
    }
  }
  return out.str();
}

std::string FormatTransportMatrix(const TransportMatrix& m) {
  if (m.size == 0) return "";
  size_t width = 4;
  for (const auto& row : m.cells) {
    for (const std::string& c : row) width = std::max(width, c.size() + 2);
  }
  auto pad = [&](const std::string& s) {
    return std::string(width > s.size() ? width - s.size() : 1, ' ') + s;
  };
  std::ostringstream out;
  out << "NCCL transports (rank -> rank, as NCCL connected them):\n";
  out << "  src\\dst";
  for (int b = 0; b < m.size; ++b) out << pad(std::to_string(b));
  out << "\n";
  for (int a = 0; a < m.size; ++a) {
    std::string head = "  " + std::to_string(a);
    out << head << std::string(head.size() < 9 ? 9 - head.size() : 1, ' ');
    for (int b = 0; b < m.size; ++b)
      out << pad(a == b ? "-" : m.cells[a][b].empty() ? "." : m.cells[a][b]);
    out << "\n";
  }
  out << "  (P2P NVLink/PCIe, SHM host memory, IB[/GDR] InfiniBand [GPU Direct RDMA], SOCK TCP; "
         ". not connected directly)\n";
  return out.str();
}

std::string FormatReport(const NcclReport& report) {
  const ParseResult& p = report.parsed;
  std::ostringstream out;
  std::set<std::string> versions, hosts;
  for (const RankLog& r : p.ranks) {
    if (!r.version.empty())
      versions.insert(r.version + (r.cuda_version.empty() ? "" : "+cuda" + r.cuda_version));
    if (!r.host.empty()) hosts.insert(r.host);
  }
  out << "NCCL logs: " << p.ranks.size() << (p.ranks.size() == 1 ? " rank" : " ranks") << " on "
      << hosts.size() << (hosts.size() == 1 ? " node" : " nodes");
  if (!versions.empty()) {
    out << ", NCCL";
    for (const std::string& v : versions) out << " " << v;
  }
  out << " (" << p.nccl_lines << " NCCL lines in " << p.sources.size()
      << (p.sources.size() == 1 ? " file" : " files") << ")\n";
  if (report.verdicts.empty()) out << "  no NCCL problem found\n";
  for (const std::string& line : FormatVerdicts(report.verdicts)) out << "  " << line << "\n";
  std::string topo = FormatTopology(report.nodes);
  if (!topo.empty()) {
    out << "  topology:\n";
    std::istringstream lines(topo);
    for (std::string l; std::getline(lines, l);) out << "    " << l << "\n";
  }
  for (const RankLog& r : p.ranks) {
    if (r.warning_count == 0) continue;
    out << "  NCCL WARN of " << RankLabel(r) << " (" << r.warning_count << "):\n";
    for (const std::string& w : r.warnings) out << "    " << w << "\n";
  }
  std::string matrix = FormatTransportMatrix(report.transports);
  if (!matrix.empty()) {
    std::istringstream lines(matrix);
    for (std::string l; std::getline(lines, l);) out << "  " << l << "\n";
  }
  for (const std::string& problem : p.problems) out << "  unreadable: " << problem << "\n";
  return out.str();
}

std::string FormatPreflightSection(const NcclReport& report) {
  if (report.parsed.ranks.empty()) return "";
  std::string out = FormatTransportMatrix(report.transports);
  for (const std::string& line : FormatVerdicts(report.verdicts)) out += line + "\n";
  return out;
}

nlohmann::json VerdictToJson(const Verdict& v) {
  return {{"kind", v.kind},        {"severity", v.severity}, {"ranks", v.ranks},
          {"hosts", v.hosts},      {"message", v.message},   {"fix", v.fix},
          {"evidence", v.evidence}};
}

nlohmann::json ReportToJson(const NcclReport& report) {
  const ParseResult& p = report.parsed;
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankLog& r : p.ranks) ranks.push_back(RankJson(r));
  nlohmann::json verdicts = nlohmann::json::array();
  for (const Verdict& v : report.verdicts) verdicts.push_back(VerdictToJson(v));
  nlohmann::json nodes = nlohmann::json::array();
  for (const NodeTopology& n : report.nodes) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuTopology& g : n.gpus) {
      gpus.push_back({{"rank", g.rank},
                      {"cuda_dev", g.cuda_dev},
                      {"bus_id", g.bus_id},
                      {"nic_distance", DistancesJson(g.nics)}});
    }
    nodes.push_back({{"host", n.host},
                     {"ranks", n.ranks},
                     {"network", n.network},
                     {"nics", InterfacesJson(n.nics)},
                     {"bootstrap", InterfacesJson(n.bootstrap)},
                     {"gdr", GdrWord(n.gdr)},
                     {"gpus", gpus}});
  }
  return {
      {"schema", "dlaunch.nccl/1"},
      {"sources", p.sources},
      {"bytes", p.bytes},
      {"lines", p.lines},
      {"nccl_lines", p.nccl_lines},
      {"problems", p.problems},
      {"verdicts", verdicts},
      {"nodes", nodes},
      {"transport_matrix", {{"size", report.transports.size}, {"cells", report.transports.cells}}},
      {"ranks", ranks}};
}

}  // namespace dlaunch::launcher::nccl_log
