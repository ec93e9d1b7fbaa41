// The rules: each looks at every rank's facts and, when it fires, names the ranks and hosts,
// the fix, and the log lines that show it.
#include <algorithm>
#include <map>
#include <set>

#include "core/base/format.h"
#include "launcher/nccl_log/line.h"
#include "launcher/nccl_log/report.h"

namespace dlaunch::launcher::nccl_log {

namespace {

bool Contains(const std::string& s, const char* p) { return s.find(p) != std::string::npos; }

template <typename Container>
std::string Join(const Container& items, const char* sep = ", ") {
  std::string out;
  for (const std::string& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

// A group of ranks that share something, in log order.
struct Group {
  std::vector<const RankLog*> ranks;

  std::vector<int> Ranks() const {
    std::vector<int> out;
    for (const RankLog* r : ranks) {
      if (r->rank >= 0) out.push_back(r->rank);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  std::vector<std::string> Hosts() const {
    std::vector<std::string> out;
    for (const RankLog* r : ranks) {
      if (!r->host.empty() && std::find(out.begin(), out.end(), r->host) == out.end()) {
        out.push_back(r->host);
      }
    }
    return out;
  }
  // "ranks 4-7 (node-b)", "rank 2 (node-a, node-b)", or the labels of unnamed ranks.
  std::string Describe() const {
    std::vector<int> named = Ranks();
    std::string out;
    if (!named.empty()) out = base::NameRanks(named);
    for (const RankLog* r : ranks) {
      if (r->rank >= 0) continue;
      out += (out.empty() ? "" : ", ") + RankLabel(*r);
    }
    std::vector<std::string> hosts = Hosts();
    if (!named.empty() && !hosts.empty()) out += " (" + Join(hosts) + ")";
    return out;
  }
};

// The specific fixes found, or `fallback` when none applies; then the verdict is out.
void Emit(Verdict v, const std::vector<std::string>& fixes, const char* fallback,
          std::vector<Verdict>* out) {
  v.fix = fixes.empty() ? fallback : Join(fixes, "; ");
  out->push_back(std::move(v));
}

Verdict Make(const char* kind, const char* severity, const Group& g) {
  Verdict v;
  v.kind = kind;
  v.severity = severity;
  v.ranks = g.Ranks();
  v.hosts = g.Hosts();
  return v;
}

std::string Who(const RankLog& r) {
  return r.rank >= 0 ? "rank " + std::to_string(r.rank) : RankLabel(r);
}

std::string LinkLine(const Link& l) {
  std::string s = "Channel " + std::to_string(l.channels.empty() ? 0 : l.channels.front()) + " : " +
                  std::to_string(l.src) + "[" + l.src_dev + "] -> " + std::to_string(l.dst) + "[" +
                  l.dst_dev + "]";
  if (!l.direction.empty()) s += " [" + l.direction + "]";
  return s + " via " + l.via;
}

const Link* FirstLink(const RankLog& r, Transport t) {
  for (const CommRecord& c : r.comms) {
    for (const Link& l : c.links) {
      if (l.transport == t) return &l;
    }
  }
  return nullptr;
}

bool EnvOn(const RankLog& r, const char* name) {
  auto it = r.env.find(name);
  return it != r.env.end() && !it->second.empty() && it->second != "0";
}

std::string EnvValue(const RankLog& r, const char* name) {
  auto it = r.env.find(name);
  return it == r.env.end() ? "" : it->second;
}

// 22105 -> "2.21.5" (NCCL >= 2.9 encodes major*10000), 2506 -> "2.5.6".
std::string DecodeVersion(int code) {
  int major = code >= 10000 ? code / 10000 : code / 1000;
  int minor = code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

int IntAfterText(const std::string& s, const std::string& key, size_t from, size_t* end) {
  size_t p = s.find(key, from);
  if (p == std::string::npos) return -1;
  p += key.size();
  int v = 0;
  size_t i = p;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') v = v * 10 + (s[i++] - '0');
  *end = i;
  return i == p ? -1 : v;
}

void VersionMismatch(const ParseResult& p, std::vector<Verdict>* out) {
  std::map<std::string, Group> by_version;
  std::vector<std::string> order;
  for (const RankLog& r : p.ranks) {
    if (r.version.empty()) continue;
    if (!by_version.count(r.version)) order.push_back(r.version);
    by_version[r.version].ranks.push_back(&r);
  }
  std::vector<std::string> reported;  // NCCL's own "Mismatched NCCL version detected" WARN
  Group warned;
  for (const RankLog& r : p.ranks) {
    for (const std::string& w : r.warnings) {
      size_t at = w.find("Mismatched NCCL version");
      if (at == std::string::npos) continue;
      size_t e = at;
      int r1 = IntAfterText(w, "rank ", e, &e), v1 = IntAfterText(w, "version ", e, &e);
      int r2 = IntAfterText(w, "rank ", e, &e), v2 = IntAfterText(w, "version ", e, &e);
      if (v1 >= 0 && v2 >= 0) {
        reported.push_back("rank " + std::to_string(r1) + " has " + DecodeVersion(v1) + ", rank " +
                           std::to_string(r2) + " has " + DecodeVersion(v2));
      }
      warned.ranks.push_back(&r);
      break;
    }
  }
  if (order.size() < 2 && reported.empty()) return;
  Group all;
  std::string parts;
  for (const std::string& v : order) {
    const Group& g = by_version[v];
    parts += (parts.empty() ? "" : ", ") + v + " on " + g.Describe();
    all.ranks.insert(all.ranks.end(), g.ranks.begin(), g.ranks.end());
  }
  Verdict v = Make("nccl_version_mismatch", "error", order.size() >= 2 ? all : warned);
  if (order.size() >= 2) {
    v.message = "ranks run different NCCL versions: " + parts;
  } else {
    v.message = "NCCL found mismatched versions between ranks: " + reported.front();
  }
  v.fix =
      "install one NCCL version on every node (the same PyTorch build or libnccl2 package "
      "everywhere); NCCL does not form a communicator across versions";
  for (const std::string& r : reported) v.evidence.push_back("NCCL WARN: " + r);
  out->push_back(std::move(v));
}

void SocketFallback(const ParseResult& p, std::vector<Verdict>* out) {
  Group ib, socket;
  std::set<std::string> ib_names;
  for (const RankLog& r : p.ranks) {
    bool has_ib = !r.ib.empty() || FirstLink(r, Transport::kNetIb) != nullptr;
    if (has_ib) ib.ranks.push_back(&r);
    for (const NetInterface& d : r.ib) ib_names.insert(d.name);
    if (FirstLink(r, Transport::kNetSocket)) socket.ranks.push_back(&r);
  }
  if (ib.ranks.empty() || socket.ranks.empty()) return;
  Verdict v = Make("socket_fallback", "error", socket);
  const std::string names = Join(ib_names);
  const std::string where = Join(ib.Hosts());
  v.message = socket.Describe() + " send inter-node traffic over NET/Socket (TCP) while " +
              (where.empty() ? ib.Describe() : where) + " " +
              (ib.Hosts().size() == 1 ? "has" : "have") + " InfiniBand" +
              (names.empty() ? "" : " (" + names + ")") + ": expect several times lower bandwidth";
  Group ib_off, net_socket, no_device;
  for (const RankLog* r : socket.ranks) {
    if (EnvOn(*r, "NCCL_IB_DISABLE")) ib_off.ranks.push_back(r);
    if (EnvValue(*r, "NCCL_NET") == "Socket") net_socket.ranks.push_back(r);
    if (r->ib_no_device) no_device.ranks.push_back(r);
    v.evidence.push_back(Who(*r) + ": " + LinkLine(*FirstLink(*r, Transport::kNetSocket)));
  }
  std::vector<std::string> fixes;
  if (!ib_off.ranks.empty()) {
    fixes.push_back("unset NCCL_IB_DISABLE (set to " +
                    EnvValue(*ib_off.ranks.front(), "NCCL_IB_DISABLE") + " on " +
                    ib_off.Describe() + ")");
  }
  if (!net_socket.ranks.empty()) {
    fixes.push_back("unset NCCL_NET=Socket (set on " + net_socket.Describe() + ")");
  }
  if (!no_device.ranks.empty()) {
    const std::string hosts = Join(no_device.Hosts());
    fixes.push_back(
        "make the IB devices visible to NCCL on " + (hosts.empty() ? no_device.Describe() : hosts) +
        " (NCCL logged \"NET/IB : No device found\"): install rdma-core/libibverbs and, "
        "in a container, pass --device=/dev/infiniband with --ulimit memlock=-1");
    for (const RankLog* r : no_device.ranks)
      v.evidence.push_back(Who(*r) + ": NET/IB : No device found.");
  }
  Emit(std::move(v), fixes,
       "check that the IB ports are up on every node (ibv_devinfo) and that NCCL_NET and "
       "NCCL_IB_HCA do not exclude them",
       out);
}

bool IsVirtualInterface(const NetInterface& i) {
  static const char* kPrefixes[] = {"lo",     "docker",  "virbr", "veth",  "br-",
                                    "cni",    "flannel", "cali",  "lxcbr", "lxdbr",
                                    "podman", "vxlan",   "weave", "vmnet", "kube-"};
  if (i.name == "lo" || StartsWith(i.address, "127.") || StartsWith(i.address, "::1<")) return true;
  if (StartsWith(i.name, "lo") && i.name != "lo") return false;  // "lo:1" aliases are rare; "loop"
  for (const char* p : kPrefixes) {
    if (StartsWith(i.name, p)) return true;
  }
  return false;
}

void BadInterface(const ParseResult& p, std::vector<Verdict>* out) {
  std::set<std::string> hosts;
  int nnodes = 0;
  for (const RankLog& r : p.ranks) {
    if (!r.host.empty()) hosts.insert(r.host);
    if (const CommRecord* c = MainComm(r)) nnodes = std::max(nnodes, c->nnodes);
  }
  nnodes = std::max(nnodes, static_cast<int>(hosts.size()));
  if (nnodes < 2) return;
  Group bad, env_set;
  std::vector<std::string> evidence;
  std::set<std::string> bad_names;
  std::string good;
  for (const RankLog& r : p.ranks) {
    std::vector<std::string> found;
    auto check = [&](const std::vector<NetInterface>& list, const char* what) {
      for (const NetInterface& i : list) {
        if (IsVirtualInterface(i)) {
          bad_names.insert(i.name);
          found.push_back(std::string(what) + " " + i.name + ":" + i.address);
        } else if (good.empty()) {
          good = i.name;
        }
      }
    };
    check(r.bootstrap, "bootstrap");
    check(r.socket, "NET/Socket");
    if (found.empty()) continue;
    bad.ranks.push_back(&r);
    if (r.env.count("NCCL_SOCKET_IFNAME")) env_set.ranks.push_back(&r);
    evidence.push_back(Who(r) + ": " + Join(found));
  }
  if (bad.ranks.empty()) return;
  Verdict v = Make("bad_interface", "error", bad);
  const std::string names = Join(bad_names);
  v.message = bad.Describe() + " use the interface " + names + " on a " + std::to_string(nnodes) +
              "-node job: other nodes cannot reach it";
  std::string target = good.empty() ? "a NIC every node reaches, or ^docker0,lo to let NCCL choose"
                                    : good + " (or ^docker0,lo)";
  if (!env_set.ranks.empty()) {
    v.fix = "NCCL_SOCKET_IFNAME is set to '" + env_set.ranks.front()->env.at("NCCL_SOCKET_IFNAME") +
            "' on " + env_set.Describe() + ": set it to the interface the nodes share, " + target;
  } else {
    v.fix = "set NCCL_SOCKET_IFNAME to the interface the nodes share: " + target +
            " (dlaunch --nccl-socket-ifname sets it for every rank)";
  }
  v.evidence = std::move(evidence);
  out->push_back(std::move(v));
}

void EnvDisabled(const ParseResult& p, std::vector<Verdict>* out) {
  Group p2p, shm, unavailable;
  std::vector<std::string> p2p_ev, shm_ev, un_ev;
  for (const RankLog& r : p.ranks) {
    std::string level = EnvValue(r, "NCCL_P2P_LEVEL");
    if (EnvOn(r, "NCCL_P2P_DISABLE") || level == "LOC" || level == "0") {
      p2p.ranks.push_back(&r);
      p2p_ev.push_back(
          Who(r) + ": " +
          (EnvOn(r, "NCCL_P2P_DISABLE")
               ? "NCCL_P2P_DISABLE set by environment to " + EnvValue(r, "NCCL_P2P_DISABLE")
               : "NCCL_P2P_LEVEL set by environment to " + level));
    } else if (!r.p2p_unavailable.empty()) {
      unavailable.ranks.push_back(&r);
      un_ev.push_back(Who(r) + ": " + r.p2p_unavailable.front());
    }
    if (EnvOn(r, "NCCL_SHM_DISABLE")) {
      shm.ranks.push_back(&r);
      shm_ev.push_back(Who(r) + ": NCCL_SHM_DISABLE set by environment to " +
                       EnvValue(r, "NCCL_SHM_DISABLE"));
    }
  }
  // A warning about `g` (when it holds ranks): "<what> on <ranks>: <effect>".
  auto warn = [&](const char* kind, const Group& g, const std::string& what, const char* effect,
                  const char* fix, std::vector<std::string>* evidence) {
    if (g.ranks.empty()) return;
    Verdict v = Make(kind, "warning", g);
    v.message = what + " on " + g.Describe() + effect;
    v.fix = fix;
    v.evidence = std::move(*evidence);
    out->push_back(std::move(v));
  };
  warn("p2p_disabled", p2p, "P2P is disabled by the environment",
       ": GPUs of one node exchange data through host memory instead of NVLink/PCIe",
       "unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL; if it was set to avoid a hang, disable PCI ACS "
       "or put the IOMMU in passthrough mode instead",
       &p2p_ev);
  warn("p2p_unavailable", unavailable, "NCCL found P2P unavailable between GPUs", "",
       "check PCI ACS and IOMMU settings of the node (nvidia-smi topo -p2p r); "
       "NCCL_IGNORE_DISABLED_P2P=1 only silences the message",
       &un_ev);
  warn("shm_disabled", shm, "shared-memory transport is disabled by the environment",
       ": without P2P, ranks of one node talk over the network",
       "unset NCCL_SHM_DISABLE; if /dev/shm was too small, give the container more "
       "(docker --shm-size=1g)",
       &shm_ev);
}

bool UsesNet(const RankLog& r) {
  return FirstLink(r, Transport::kNetIb) || FirstLink(r, Transport::kNetOther) ||
         FirstLink(r, Transport::kCollNet);
}

void GdrMismatch(const ParseResult& p, std::vector<Verdict>* out) {
  Group on, off;
  for (const RankLog& r : p.ranks) {
    if (r.gdr == 1) on.ranks.push_back(&r);
    if (r.gdr == 0 && (UsesNet(r) || !r.ib.empty())) off.ranks.push_back(&r);
  }
  if (on.ranks.empty() || off.ranks.empty()) return;
  Verdict v = Make("gdr_disabled", "warning", off);
  v.message = "GPU Direct RDMA is off on " + off.Describe() + " but on for " + on.Describe() +
              ": their network traffic is staged through host memory";
  Group no_module, env_level;
  for (const RankLog* r : off.ranks) {
    for (const std::string& g : r->gdr_lines) {
      if (Contains(g, "Disabled")) {
        v.evidence.push_back(Who(*r) + ": " + g);
        if (Contains(g, "no module")) no_module.ranks.push_back(r);
        break;
      }
    }
    if (r->env.count("NCCL_NET_GDR_LEVEL") || r->env.count("NCCL_NET_GDR_READ")) {
      env_level.ranks.push_back(r);
    }
    if (const Link* l = FirstLink(*r, Transport::kNetIb))
      v.evidence.push_back(Who(*r) + ": " + LinkLine(*l));
  }
  std::vector<std::string> fixes;
  if (!no_module.ranks.empty()) {
    const std::string hosts = Join(no_module.Hosts());
    fixes.push_back("load the nvidia-peermem kernel module on " + hosts +
                    " (modprobe nvidia-peermem)");
  }
  if (!env_level.ranks.empty()) {
    fixes.push_back("NCCL_NET_GDR_LEVEL/NCCL_NET_GDR_READ is set on " + env_level.Describe() +
                    ": unset it");
  }
  Emit(std::move(v), fixes,
       "check that nvidia-peermem is loaded on those nodes and that GPU and NIC sit close "
       "enough on PCI (NCCL_NET_GDR_LEVEL)",
       out);
}

bool InitIncomplete(const RankLog& r) {
  if (r.comms.empty()) return r.step >= InitStep::kBootstrap;  // not a VERSION-level log
  for (const CommRecord& c : r.comms) {
    if (!c.complete && (c.started || c.step >= InitStep::kTopology || c.rank >= 0)) return true;
  }
  return false;
}

const char* InitFix(InitStep step) {
  if (step <= InitStep::kBootstrap) {
    return "the rank never reached the others: check that every node reaches rank 0's bootstrap "
           "address (NCCL_SOCKET_IFNAME, firewalls) and that every rank called NCCL init";
  }
  if (step <= InitStep::kInitStart) {
    return "stuck in bootstrap's exchange with the other ranks: a rank is missing or unreachable "
           "on the bootstrap interface (NCCL_SOCKET_IFNAME); look at the ranks that stopped "
           "earliest";
  }
  if (step <= InitStep::kGraph) {
    return "stuck after topology detection, in the all-gather that waits for every rank: look at "
           "the ranks that stopped earliest";
  }
  if (step == InitStep::kConnecting) {
    return "stuck connecting channels to peers: the network between the nodes blocks NCCL's "
           "connections (firewall, wrong NCCL_SOCKET_IFNAME, IB port down); `dlaunch preflight` "
           "tests every link";
  }
  return "channels connected but init did not finish: look at the WARN lines and the rank's stack";
}

void InitHang(const ParseResult& p, const AnalyzeOptions& options, std::vector<Verdict>* out) {
  if (!options.job_finished) return;
  Group stuck;
  InitStep earliest = InitStep::kComplete;
  std::map<InitStep, Group> by_step;
  for (const RankLog& r : p.ranks) {
    if (!InitIncomplete(r)) continue;
    stuck.ranks.push_back(&r);
    by_step[r.step].ranks.push_back(&r);
    earliest = std::min(earliest, r.step);
  }
  if (stuck.ranks.empty()) return;
  Verdict v = Make("init_incomplete", "error", stuck);
  std::string steps;
  for (const auto& [step, g] : by_step) {
    steps += (steps.empty() ? "" : "; ") + (by_step.size() == 1 ? "" : g.Describe() + " ") +
             "stopped at " + InitStepName(step);
  }
  bool aborted = std::any_of(stuck.ranks.begin(), stuck.ranks.end(), [](const RankLog* r) {
    return std::any_of(r->comms.begin(), r->comms.end(),
                       [](const CommRecord& c) { return c.aborted; });
  });
  v.message = "NCCL init never completed on " + stuck.Describe() + ": " + steps +
              (aborted ? " (then aborted)" : "");
  v.fix = InitFix(earliest);
  for (const RankLog* r : stuck.ranks) {
    v.evidence.push_back(Who(*r) + " last step: " + r->step_line);
    if (!r->warnings.empty()) v.evidence.push_back(Who(*r) + " warned: " + r->warnings.front());
  }
  out->push_back(std::move(v));
}

}  // namespace

std::vector<Verdict> FindVerdicts(const ParseResult& parsed, const AnalyzeOptions& options) {
  std::vector<Verdict> out;
  // Causes first, the init hang they lead to last.
  VersionMismatch(parsed, &out);
  BadInterface(parsed, &out);
  SocketFallback(parsed, &out);
  GdrMismatch(parsed, &out);
  EnvDisabled(parsed, &out);
  InitHang(parsed, options, &out);
  return out;
}

}  // namespace dlaunch::launcher::nccl_log
