#include "launcher/nccl_log/records.h"

namespace dlaunch::launcher::nccl_log {

const char* InitStepName(InitStep step) {
  switch (step) {
    case InitStep::kNone:
      return "nothing logged";
    case InitStep::kLoaded:
      return "library loaded";
    case InitStep::kBootstrap:
      return "bootstrap";
    case InitStep::kNetwork:
      return "network setup";
    case InitStep::kInitStart:
      return "communicator init started";
    case InitStep::kTopology:
      return "topology detection";
    case InitStep::kGraph:
      return "ring/tree search";
    case InitStep::kConnecting:
      return "connecting channels";
    case InitStep::kConnected:
      return "channels connected";
    case InitStep::kComplete:
      return "init complete";
  }
  return "unknown";
}

const char* TransportName(Transport t) {
  switch (t) {
    case Transport::kP2P:
      return "P2P";
    case Transport::kShm:
      return "SHM";
    case Transport::kNetIb:
      return "NET/IB";
    case Transport::kNetSocket:
      return "NET/Socket";
    case Transport::kNetOther:
      return "NET";
    case Transport::kCollNet:
      return "CollNet";
    case Transport::kNvls:
      return "NVLS";
    case Transport::kUnknown:
      return "unknown";
  }
  return "unknown";
}

const CommRecord* MainComm(const RankLog& rank) {
  const CommRecord* best = nullptr;
  for (const CommRecord& c : rank.comms) {
    if (c.rank < 0) continue;
    if (!best || c.nranks > best->nranks) best = &c;
  }
  return best;
}

}  // namespace dlaunch::launcher::nccl_log
