// What NCCL's INFO/WARN lines say about each rank, as plain data: the parser fills it, the
// verdicts, the topology summary and the renderers read it. Every list is bounded, so a log of
// any size fits in memory proportional to ranks x peers, not to its length.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dlaunch::launcher::nccl_log {

// How far a communicator's initialisation got, in the order NCCL goes through it.
enum class InitStep {
  kNone,
  kLoaded,      // "NCCL version", net plugin lines
  kBootstrap,   // "Bootstrap : Using eth0:10.0.0.1<0>"
  kNetwork,     // "NET/IB : Using ...", "NET/Socket : Using ...", "Using network IB"
  kInitStart,   // "... - Init START"
  kTopology,    // "=== System", "Setting affinity", "comm ... nNodes ..."
  kGraph,       // "Channel 00/02 : 0 1 2 3", "Trees", "Ring 00 : 3 -> 0 -> 1"
  kConnecting,  // "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"
  kConnected,   // "Connected all rings", "Connected all trees"
  kComplete,    // "... - Init COMPLETE"
};
const char* InitStepName(InitStep step);  // "bootstrap", "connecting channels", ...

enum class Transport { kP2P, kShm, kNetIb, kNetSocket, kNetOther, kCollNet, kNvls, kUnknown };
const char* TransportName(Transport t);  // "P2P", "SHM", "NET/IB", "NET/Socket", ...

// All channels of one connection kind between two ranks of one communicator.
struct Link {
  int src = -1;
  int dst = -1;         // -1 for CollNet and NVLS, which have no single peer
  std::string src_dev;  // inside the brackets: a bus id (NCCL < 2.18) or an NVML index
  std::string dst_dev;
  std::string direction;  // "send", "receive" or "" (P2P and SHM lines)
  std::string via;        // as logged: "P2P/IPC/read", "NET/IB/0/GDRDMA", "SHM/direct/direct"
  Transport transport = Transport::kUnknown;
  std::string net;  // NET lines: "IB", "Socket" or the plugin's name
  int net_dev = -1;
  bool gdr = false;           // "/GDRDMA"
  std::vector<int> channels;  // distinct channel ids, ascending
};

struct CommRecord {
  std::string ptr;  // "0x55f90cbfd740"; empty until NCCL printed it
  int rank = -1;
  int nranks = -1;
  int nnodes = -1;
  std::string comm_id;
  std::string bus_id;
  bool started = false;  // "Init START" (NCCL >= 2.18)
  bool complete = false;
  bool aborted = false;
  bool destroyed = false;
  InitStep step = InitStep::kNone;
  std::vector<Link> links;
  std::map<int, std::vector<int>> rings;  // channel -> rank order, from "Channel 00/02 : 0 1 2"
  std::vector<std::string> trees;         // "Trees [0] 1/-1/-1->0->-1 ..." lines
};

struct NetInterface {
  std::string name;     // "eth0", "mlx5_0"
  std::string address;  // "10.0.0.1<0>" for sockets, "1/IB" (port/link) for IB devices
};

// GPU -> NIC paths as NCCL's topology printed them ("NET/0 (3/24.0/PHB)", "Socket NIC
// distance : PHB").
struct NicDistance {
  std::string nic;   // "NET/0", or the network name of NCCL 2.4's "CUDA Dev" lines
  std::string path;  // PIX, PXB, PHB, SYS, NVL, ...
};

struct RankLog {
  int rank = -1;  // -1 while unknown (a rank that died before NCCL printed it)
  int nranks = -1;
  std::string host;
  int64_t pid = -1;
  int cuda_dev = -1;
  std::string bus_id;        // "7000", lower-case hex without leading zeros
  std::string source;        // the file(s) its lines came from
  std::string version;       // "2.21.5"
  std::string cuda_version;  // "12.4"
  std::vector<NetInterface> bootstrap;
  std::vector<NetInterface> socket;    // NET/Socket's interfaces
  std::vector<NetInterface> ib;        // NET/IB's devices
  std::string ib_oob;                  // NET/IB's out-of-band interface
  bool ib_no_device = false;           // "NET/IB : No device found."
  std::string network;                 // "Using network IB"
  std::string net_plugin;              // the loaded plugin's name, or "internal"
  std::vector<std::string> gdr_lines;  // "GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)"
  int gdr = -1;                        // 1 on, 0 off, -1 not logged
  std::map<std::string, std::string> env;    // "X set by environment to Y"
  std::vector<std::string> p2p_unavailable;  // "P2P is disabled between connected GPUs 0 and 1"
  std::vector<NicDistance> nic_distance;
  std::vector<CommRecord> comms;
  std::vector<std::string> warnings;  // the first kMaxWarnings WARN lines
  int64_t warning_count = 0;
  InitStep step = InitStep::kNone;  // the furthest step of the last communicator
  std::string step_line;            // the line that reached it
  int64_t lines = 0;
};

// The world communicator of a rank: the one with the most ranks (the first on a tie).
const CommRecord* MainComm(const RankLog& rank);

struct ParseResult {
  std::vector<RankLog> ranks;  // ascending rank; unknown ranks (-1) last
  std::vector<std::string> sources;
  std::vector<std::string> problems;  // unreadable files
  int64_t bytes = 0;
  int64_t lines = 0;
  int64_t nccl_lines = 0;
};

}  // namespace dlaunch::launcher::nccl_log
