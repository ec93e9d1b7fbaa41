#include "launcher/nccl_log/parser.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "launcher/nccl_log/line.h"
#include "launcher/nccl_log/messages.h"

namespace dlaunch::launcher::nccl_log {

namespace {

constexpr size_t kMaxWarnings = 20;
constexpr size_t kMaxLineText = 300;
constexpr size_t kMaxLinks = 4096;
constexpr size_t kMaxComms = 256;
constexpr size_t kMaxChannels = 128;
constexpr size_t kMaxSmallList = 16;

bool Contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

std::string Clip(std::string_view s) { return std::string(s.substr(0, kMaxLineText)); }

void PushCapped(std::vector<std::string>* v, std::string_view s) {
  if (v->size() < kMaxSmallList) v->push_back(Clip(s));
}

void AppendUnique(std::vector<NetInterface>* into, const std::vector<NetInterface>& from) {
  for (const NetInterface& i : from) {
    bool seen = std::any_of(into->begin(), into->end(), [&](const NetInterface& x) {
      return x.name == i.name && x.address == i.address;
    });
    if (!seen && into->size() < 64) into->push_back(i);
  }
}

}  // namespace

struct LogParser::State {
  struct Stream {
    RankLog log;
    int source = -1;
    int mpi_rank = -1;
    bool anonymous = false;  // lines without NCCL's host:pid:tid prefix
    int channel_rank = -1;   // the rank its Channel lines speak for
    int open_comm = -1;      // index in log.comms of the init in progress
    int last_comm = -1;
    int connected_gdr = -1;  // "Connected all rings, use ring PXN 0 GDR 1"
    std::map<std::string, std::vector<NicDistance>> gpu_paths;  // GPU bus id -> NETs
  };
  struct Source {
    std::string name;
    int rank_hint = -1;
  };

  std::vector<Stream> streams;
  std::unordered_map<std::string, size_t> index;
  std::vector<Source> sources;
  std::vector<std::string> problems;
  std::string key;  // reused for lookups, so a line costs no allocation once warm
  Link scratch;
  std::vector<int> order_scratch;
  int64_t bytes = 0, lines = 0, nccl_lines = 0;

  template <typename T>
  void AppendRaw(T v) {
    key.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }

  Stream& StreamFor(const LogLine& l) {
    key.clear();
    if (l.host.empty()) {
      key += '\x01';
      AppendRaw(sources.size() - 1);
      AppendRaw(l.mpi_rank);
    } else {
      key.append(l.host);
      key += '\0';
      AppendRaw(l.pid);
      AppendRaw(l.dev);
    }
    auto it = index.find(key);
    if (it != index.end()) return streams[it->second];
    index.emplace(key, streams.size());
    Stream& s = streams.emplace_back();
    s.source = static_cast<int>(sources.size()) - 1;
    s.anonymous = l.host.empty();
    s.log.host.assign(l.host);
    s.log.pid = l.pid;
    s.log.cuda_dev = l.dev;
    s.mpi_rank = l.mpi_rank;
    return s;
  }

  void Advance(Stream& s, InitStep step, std::string_view message) {
    if (step >= s.log.step) {
      s.log.step = step;
      s.log.step_line = Clip(message);
    }
    if (s.open_comm >= 0 && step > s.log.comms[s.open_comm].step) {
      s.log.comms[s.open_comm].step = step;
    }
  }

  int NewComm(Stream& s) {
    if (s.log.comms.size() >= kMaxComms) return s.open_comm >= 0 ? s.open_comm : s.last_comm;
    s.log.comms.emplace_back();
    s.open_comm = static_cast<int>(s.log.comms.size()) - 1;
    s.log.step = InitStep::kNone;  // a new communicator starts its own climb
    return s.open_comm;
  }

  // The communicator an init-structure line belongs to: the open one, else a new one.
  CommRecord& OpenComm(Stream& s) {
    if (s.open_comm < 0) NewComm(s);
    return s.log.comms[s.open_comm >= 0 ? s.open_comm : s.last_comm];
  }

  // The communicator `ptr` names: an unfinished one with that pointer, else the open one.
  int FindComm(Stream& s, const std::string& ptr, bool any_state) {
    for (int i = static_cast<int>(s.log.comms.size()) - 1; i >= 0; --i) {
      const CommRecord& c = s.log.comms[i];
      if (!ptr.empty() && c.ptr == ptr && (any_state || !c.complete)) return i;
    }
    if (s.open_comm >= 0) {
      const std::string& open_ptr = s.log.comms[s.open_comm].ptr;
      if (open_ptr.empty() || open_ptr == ptr) return s.open_comm;
    }
    return -1;
  }

  static void Fill(CommRecord& c, const CommLine& cl) {
    if (!cl.ptr.empty()) c.ptr = cl.ptr;
    if (cl.rank >= 0) c.rank = cl.rank;
    if (cl.nranks >= 0) c.nranks = cl.nranks;
    if (cl.nnodes >= 0) c.nnodes = cl.nnodes;
    if (!cl.bus_id.empty()) c.bus_id = cl.bus_id;
    if (!cl.comm_id.empty()) c.comm_id = cl.comm_id;
  }

  void OnCommLine(Stream& s, std::string_view m) {
    CommLine cl;
    if (!ParseCommLine(m, &cl)) return;
    if (!cl.bus_id.empty() && s.log.bus_id.empty()) s.log.bus_id = cl.bus_id;
    if (Contains(m, "Init START")) {
      int i = FindComm(s, cl.ptr, false);
      if (i < 0 || s.log.comms[i].started) i = NewComm(s);
      s.open_comm = i;
      Fill(s.log.comms[i], cl);
      s.log.comms[i].started = true;
      s.log.step = InitStep::kNone;
      Advance(s, InitStep::kInitStart, m);
    } else if (Contains(m, "Init COMPLETE")) {
      int i = FindComm(s, cl.ptr, false);
      if (i < 0) i = NewComm(s);
      Fill(s.log.comms[i], cl);
      s.log.comms[i].complete = true;
      s.open_comm = i;
      Advance(s, InitStep::kComplete, m);
      s.open_comm = -1;
      s.last_comm = i;
    } else if (Contains(m, "Abort") || Contains(m, "Destroy COMPLETE")) {
      int i = FindComm(s, cl.ptr, true);
      if (i < 0) return;
      if (Contains(m, "Abort")) {
        s.log.comms[i].aborted = true;
      } else {
        s.log.comms[i].destroyed = true;
      }
      if (s.open_comm == i) s.open_comm = -1;
    } else if (Contains(m, " nNodes ")) {
      int i = FindComm(s, cl.ptr, false);
      if (i < 0) i = NewComm(s);
      s.open_comm = i;
      Fill(s.log.comms[i], cl);
      Advance(s, InitStep::kTopology, m);
    }
  }

  void OnLink(Stream& s, std::string_view m, int channel) {
    if (s.channel_rank < 0)
      s.channel_rank = scratch.direction == "receive" ? scratch.dst : scratch.src;
    if (s.open_comm < 0 && s.last_comm < 0) NewComm(s);
    int ci = s.open_comm >= 0 ? s.open_comm : s.last_comm;
    if (ci < 0) return;
    CommRecord& c = s.log.comms[ci];
    if (s.open_comm >= 0) Advance(s, InitStep::kConnecting, m);
    Link* link = nullptr;
    for (Link& l : c.links) {
      if (l.src == scratch.src && l.dst == scratch.dst && l.via == scratch.via &&
          l.direction == scratch.direction) {
        link = &l;
        break;
      }
    }
    if (!link) {
      if (c.links.size() >= kMaxLinks) return;
      link = &c.links.emplace_back(scratch);
    }
    auto pos = std::lower_bound(link->channels.begin(), link->channels.end(), channel);
    if ((pos == link->channels.end() || *pos != channel) && link->channels.size() < kMaxChannels) {
      link->channels.insert(pos, channel);
    }
  }

  void OnNet(Stream& s, std::string_view m) {
    RankLog& r = s.log;
    if (StartsWith(m, "NET/Socket : Using")) {
      AppendUnique(&r.socket, ParseInterfaces(m.substr(18)));
      Advance(s, InitStep::kNetwork, m);
    } else if (StartsWith(m, "NET/IB : Using")) {
      std::string_view rest = m.substr(14);
      size_t oob = rest.find("OOB ");
      AppendUnique(&r.ib, ParseInterfaces(rest.substr(0, rest.find(';'))));
      if (oob != std::string_view::npos) r.ib_oob = Clip(rest.substr(oob + 4));
      Advance(s, InitStep::kNetwork, m);
    } else if (StartsWith(m, "NET/IB : No device found")) {
      r.ib_no_device = true;
      Advance(s, InitStep::kNetwork, m);
    } else if (StartsWith(m, "NET/Plugin")) {
      size_t loaded = m.find("Loaded net plugin ");
      if (loaded != std::string_view::npos) {
        std::string_view name = m.substr(loaded + 18);
        r.net_plugin = Clip(name.substr(0, name.find(" (")));
      } else if (Contains(m, "No plugin found") || Contains(m, "internal")) {
        if (r.net_plugin.empty()) r.net_plugin = "internal";
      }
      Advance(s, InitStep::kLoaded, m);
    } else if (StartsWith(m, "NVLS comm ")) {
      scratch = Link{};
      scratch.src = OpenComm(s).rank;
      scratch.via = "NVLS";
      scratch.transport = Transport::kNvls;
      OnLink(s, m, 0);
    }
    if (Contains(m, "GPU Direct RDMA")) PushCapped(&r.gdr_lines, m);
  }

  // Most lines of a large log are per-collective lines no rule reads: the first character
  // decides which few searches a message gets.
  void OnMessage(Stream& s, std::string_view m) {
    RankLog& r = s.log;
    const char first = m.empty() ? '\0' : m.front();
    std::string name, value;
    // "NCCL_X set by environment to Y" (every such variable starts with NCCL_).
    if (first == 'N' && StartsWith(m, "NCCL_") && ParseEnvLine(m, &name, &value)) {
      if (r.env.size() < 256) r.env[name] = Clip(value);
      return;
    }
    // "comm 0x.. rank ..." (2.4-2.17), "ncclCommInitRank comm 0x.." (2.18+).
    if ((first == 'c' || first == 'n') &&
        (Contains(m, "- Init ") || Contains(m, " - Abort ") || Contains(m, " - Destroy ") ||
         (Contains(m, " nNodes ") && Contains(m, "comm ")))) {
      OnCommLine(s, m);
      return;
    }
    int channel = 0;
    switch (first) {
      case 'C':
      case 'R':
        if (ParseLinkLine(m, &scratch, &channel)) {
          OnLink(s, m, channel);
        } else if (ParseRingOrder(m, &channel, &order_scratch)) {
          CommRecord& c = OpenComm(s);
          if (c.rings.size() < kMaxChannels) c.rings[channel] = order_scratch;
          Advance(s, InitStep::kGraph, m);
        } else if (StartsWith(m, "Ring ")) {
          OpenComm(s);
          Advance(s, InitStep::kGraph, m);
        } else if (StartsWith(m, "Connected ")) {
          size_t g = m.find(" GDR ");
          if (g != std::string_view::npos) s.connected_gdr = m.substr(g + 5, 1) == "1" ? 1 : 0;
          OpenComm(s);
          Advance(s, InitStep::kConnected, m);
        } else if (StartsWith(m, "CUDA Dev ")) {
          int dev = -1;
          std::vector<NicDistance> nets;
          if (ParseNicDistanceLine(m, &dev, &nets)) r.nic_distance = std::move(nets);
          Advance(s, InitStep::kNetwork, m);
        } else if (StartsWith(m, "CPU/")) {
          Advance(s, InitStep::kTopology, m);
        }
        return;
      case 'T':
        if (StartsWith(m, "Trees") || StartsWith(m, "Tree ")) {
          CommRecord& c = OpenComm(s);
          if (StartsWith(m, "Trees") && c.trees.size() < 4) c.trees.push_back(Clip(m));
          Advance(s, InitStep::kGraph, m);
        }
        return;
      case 'B':
        if (StartsWith(m, "Bootstrap : Using") || StartsWith(m, "Bootstrap: Using")) {
          AppendUnique(&r.bootstrap, ParseInterfaces(m.substr(m.find("Using") + 5)));
          Advance(s, InitStep::kBootstrap, m);
        }
        return;
      case 'N':
        if (StartsWith(m, "NCCL version")) {
          ParseVersion(m, &r.version, &r.cuda_version);
          Advance(s, InitStep::kLoaded, m);
        } else {
          OnNet(s, m);
        }
        return;
      case 'U':
        if (StartsWith(m, "Using network ")) {
          r.network = Clip(m.substr(14));
          Advance(s, InitStep::kNetwork, m);
        }
        return;
      case 'S':
        if (StartsWith(m, "Setting affinity")) {
          OpenComm(s);
          Advance(s, InitStep::kTopology, m);
        }
        return;
      case '=':
        if (StartsWith(m, "=== System")) {
          OpenComm(s);
          Advance(s, InitStep::kTopology, m);
        }
        return;
      case 'P':
        if (StartsWith(m, "P2P is disabled between")) {
          PushCapped(&r.p2p_unavailable, m);
        } else if (StartsWith(m, "Pattern ")) {
          OpenComm(s);
          Advance(s, InitStep::kGraph, m);
        }
        return;
      case 'G':
        if (StartsWith(m, "GPU Direct RDMA")) {
          PushCapped(&r.gdr_lines, m);
        } else {
          std::string gpu;
          std::vector<NicDistance> nets;
          if (ParsePathsLine(m, &gpu, &nets) && !nets.empty() && s.gpu_paths.size() < 64) {
            s.gpu_paths[gpu] = std::move(nets);
          }
        }
        return;
      default:
        return;
    }
  }

  void OnLine(std::string_view raw) {
    ++lines;
    LogLine l;
    if (!SplitLine(raw, &l)) return;
    ++nccl_lines;
    Stream& s = StreamFor(l);
    ++s.log.lines;
    if (s.mpi_rank < 0) s.mpi_rank = l.mpi_rank;
    switch (l.level) {
      case Level::kWarn:
        ++s.log.warning_count;
        if (s.log.warnings.size() < kMaxWarnings) {
          std::string w = l.where.empty() ? "" : std::string(l.where) + " ";
          s.log.warnings.push_back(Clip(w + std::string(l.message)));
        }
        return;
      case Level::kTrace:
        return;
      case Level::kVersion:
        ParseVersion(l.message, &s.log.version, &s.log.cuda_version);
        Advance(s, InitStep::kLoaded, l.message);
        return;
      case Level::kInfo:
        OnMessage(s, l.message);
        return;
    }
  }
};

LogParser::LogParser() : state_(std::make_unique<State>()) {}
LogParser::~LogParser() = default;

void LogParser::BeginSource(const std::string& name, int rank_hint) {
  state_->sources.push_back({name, rank_hint});
}

void LogParser::AddLine(std::string_view line) {
  if (state_->sources.empty()) BeginSource("<input>");
  state_->bytes += static_cast<int64_t>(line.size()) + 1;
  state_->OnLine(line);
}

bool LogParser::AddFile(const std::string& path, int rank_hint) {
  BeginSource(path, rank_hint);
  std::string error;
  bool ok = ReadLines(
      path, [this](std::string_view line) { state_->OnLine(line); }, &state_->bytes, &error);
  if (!ok) state_->problems.push_back(path + ": " + error);
  return ok;
}

namespace {

// Lines a process printed on another device's stream (before cudaSetDevice, or from a helper
// thread) describe the same process: its version, interfaces and environment; with
// `gpu_facts`, also what belongs to a GPU (warnings, GDR, NIC distance, last step), which is
// right only when `from` is no other rank's. Communicators stay where they are, so a stray line
// cannot invent an unfinished init.
void MergeProcessFacts(RankLog& into, const RankLog& from, bool gpu_facts = true) {
  if (into.version.empty()) {
    into.version = from.version;
    into.cuda_version = from.cuda_version;
  }
  AppendUnique(&into.bootstrap, from.bootstrap);
  AppendUnique(&into.socket, from.socket);
  AppendUnique(&into.ib, from.ib);
  if (into.ib_oob.empty()) into.ib_oob = from.ib_oob;
  into.ib_no_device = into.ib_no_device || from.ib_no_device;
  if (into.network.empty()) into.network = from.network;
  if (into.net_plugin.empty()) into.net_plugin = from.net_plugin;
  into.env.insert(from.env.begin(), from.env.end());
  if (into.bus_id.empty() && gpu_facts) into.bus_id = from.bus_id;
  if (into.host.empty()) into.host = from.host;
  if (into.pid < 0) into.pid = from.pid;
  if (!gpu_facts) return;
  for (const std::string& g : from.gdr_lines) PushCapped(&into.gdr_lines, g);
  if (into.gdr < 0) into.gdr = from.gdr;
  for (const std::string& p : from.p2p_unavailable) PushCapped(&into.p2p_unavailable, p);
  if (into.nic_distance.empty()) into.nic_distance = from.nic_distance;
  for (const std::string& w : from.warnings) {
    if (into.warnings.size() < kMaxWarnings) into.warnings.push_back(w);
  }
  into.warning_count += from.warning_count;
  if (into.comms.empty() && from.step > into.step) {
    into.step = from.step;
    into.step_line = from.step_line;
  }
  if (into.source.find(from.source) == std::string::npos) into.source += ", " + from.source;
  into.lines += from.lines;
}

// GDR as the links show it: any NET link with GDRDMA is on; NET links (other than sockets)
// without it are off; else what "Connected all rings ... GDR n" or the GDR lines said.
int GdrOf(const RankLog& r, int connected_gdr) {
  bool on = false, off = false;
  for (const CommRecord& c : r.comms) {
    for (const Link& l : c.links) {
      if (l.transport != Transport::kNetIb && l.transport != Transport::kNetOther &&
          l.transport != Transport::kCollNet) {
        continue;
      }
      (l.gdr ? on : off) = true;
    }
  }
  if (on) return 1;
  if (off) return 0;
  if (connected_gdr >= 0) return connected_gdr;
  for (const std::string& g : r.gdr_lines) {
    if (Contains(g, "Enabled for GPU")) return 1;
    if (Contains(g, "Disabled for GPU")) return 0;
  }
  return -1;
}

}  // namespace

ParseResult LogParser::Finish() {
  State& st = *state_;
  ParseResult out;
  out.bytes = st.bytes;
  out.lines = st.lines;
  out.nccl_lines = st.nccl_lines;
  out.problems = st.problems;
  for (const auto& src : st.sources) out.sources.push_back(src.name);

  for (State::Stream& s : st.streams) {
    RankLog& r = s.log;
    const CommRecord* main = MainComm(r);
    r.rank = main && main->rank >= 0 ? main->rank : s.channel_rank;
    if (main) r.nranks = main->nranks;
    if (r.bus_id.empty() && main) r.bus_id = main->bus_id;
    r.gdr = GdrOf(r, s.connected_gdr);
    if (r.network.empty() && !r.ib.empty()) r.network = "IB";  // NCCL < 2.7 did not say
    if (r.network.empty() && !r.socket.empty() && r.ib.empty()) r.network = "Socket";
    if (s.source >= 0) r.source = st.sources[s.source].name;
  }

  // Processes, in the order they first appeared; how many each source holds.
  std::vector<std::pair<std::string, int64_t>> order;
  std::map<std::pair<std::string, int64_t>, std::vector<size_t>> procs;
  std::map<int, std::set<std::pair<std::string, int64_t>>> per_source;
  for (size_t i = 0; i < st.streams.size(); ++i) {
    const State::Stream& s = st.streams[i];
    if (s.anonymous) continue;
    auto key = std::make_pair(s.log.host, s.log.pid);
    if (!procs.count(key)) order.push_back(key);
    procs[key].push_back(i);
    per_source[s.source].insert(key);
  }
  struct Out {
    RankLog log;
    int mpi_rank = -1;
    int source = -1;
  };
  std::vector<Out> ranks;
  for (const auto& key : order) {
    std::vector<size_t> ranked, unranked;
    std::map<std::string, std::vector<NicDistance>> paths;
    for (size_t i : procs[key]) {
      (st.streams[i].log.rank >= 0 ? ranked : unranked).push_back(i);
      paths.insert(st.streams[i].gpu_paths.begin(), st.streams[i].gpu_paths.end());
    }
    const size_t first = ranks.size();
    if (ranked.empty()) {
      const State::Stream& head = st.streams[unranked.front()];
      Out o{head.log, head.mpi_rank, head.source};
      for (size_t k = 1; k < unranked.size(); ++k) {
        MergeProcessFacts(o.log, st.streams[unranked[k]].log);
        if (o.log.comms.empty()) o.log.comms = st.streams[unranked[k]].log.comms;
      }
      int hint = st.sources[head.source].rank_hint;
      if (o.mpi_rank >= 0) {
        o.log.rank = o.mpi_rank;
      } else if (hint >= 0 && per_source[head.source].size() == 1) {
        o.log.rank = hint;
      }
      ranks.push_back(std::move(o));
    } else {
      for (size_t i : ranked) {
        Out o{st.streams[i].log, st.streams[i].mpi_rank, st.streams[i].source};
        for (size_t u : unranked) MergeProcessFacts(o.log, st.streams[u].log);
        for (size_t j : ranked) {
          if (j != i) MergeProcessFacts(o.log, st.streams[j].log, false);
        }
        ranks.push_back(std::move(o));
      }
    }
    for (size_t k = first; k < ranks.size(); ++k) {
      RankLog& r = ranks[k].log;
      auto it = paths.find(r.bus_id);
      if (it == paths.end() && paths.size() == 1) it = paths.begin();
      if (r.nic_distance.empty() && it != paths.end()) r.nic_distance = it->second;
    }
  }
  // Lines without NCCL's prefix (the bare "NCCL version" rank 0 prints to stdout) join the
  // rank of their MPI prefix, or the one process of their file.
  for (const State::Stream& a : st.streams) {
    if (!a.anonymous) continue;
    bool merged = false;
    for (Out& o : ranks) {
      bool same_mpi = a.mpi_rank >= 0 && o.mpi_rank == a.mpi_rank;
      bool same_file = a.mpi_rank < 0 && o.source == a.source && per_source[a.source].size() == 1;
      if (same_mpi || same_file) {
        MergeProcessFacts(o.log, a.log);
        merged = true;
      }
    }
    // A bare version line nobody claims says nothing about a rank; keep only real content.
    if (!merged && (!a.log.comms.empty() || a.log.warning_count > 0)) {
      Out o{a.log, a.mpi_rank, a.source};
      int hint = st.sources[a.source].rank_hint;
      o.log.rank = a.mpi_rank >= 0 ? a.mpi_rank : hint;
      ranks.push_back(std::move(o));
    }
  }
  std::stable_sort(ranks.begin(), ranks.end(), [](const Out& a, const Out& b) {
    if ((a.log.rank < 0) != (b.log.rank < 0)) return a.log.rank >= 0;
    return a.log.rank < b.log.rank;
  });
  for (Out& o : ranks) out.ranks.push_back(std::move(o.log));
  return out;
}

}  // namespace dlaunch::launcher::nccl_log
