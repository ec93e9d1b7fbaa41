// Parsers of single NCCL INFO messages (the text after "NCCL INFO "), one per shape NCCL has
// printed between 2.4 and 2.28. Pure functions over string views; none allocates unless it
// returns a match.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "launcher/nccl_log/records.h"

namespace dlaunch::launcher::nccl_log {

// "Channel 00/0 : 3[4a000] -> 6[44000] [send] via NET/IB/0/GDRDMA", "Ring 00 : 0[0] -> 1[1] via
// P2P/IPC" (NCCL 2.5), "Channel 01 : 0[7000] -> 1[b000] via direct shared memory",
// "CollNet 00/0 : 3 [send] via COLLNET/SHARP/0". Fills one channel of `link`.
bool ParseLinkLine(std::string_view message, Link* link, int* channel);

// What a "via" string says: P2P/IPC -> kP2P, NET/IB/0/GDRDMA -> kNetIb (dev 0, gdr), ...
void ClassifyVia(Link* link);

// "Channel 00/02 :    0   1   2   3" or NCCL 2.5's "Ring 00 : 0 1 2 3": one ring's rank order.
bool ParseRingOrder(std::string_view message, int* channel, std::vector<int>* order);

// " [0]eth0:10.0.0.1<0> [1]ib0:10.1.0.1<0>", " eth0:10.0.0.1<0>", " [0]mlx5_0:1/IB
// [1]mlx5_1:1/RoCE"
std::vector<NetInterface> ParseInterfaces(std::string_view list);

// "comm 0x55f9 rank 3 nranks 8 cudaDev 3 nvmlDev 3 busId 4a000 commId 0x1f - Init COMPLETE"
// and its older and newer spellings; fields NCCL did not print stay as they were.
struct CommLine {
  std::string ptr;
  int rank = -1;
  int nranks = -1;
  int nnodes = -1;
  int cuda_dev = -1;
  std::string bus_id;
  std::string comm_id;
};
bool ParseCommLine(std::string_view message, CommLine* out);

// "NCCL_SOCKET_IFNAME set by environment to lo", "NCCL_IB_DISABLE set by environment to 1."
bool ParseEnvLine(std::string_view message, std::string* name, std::string* value);

// "NCCL version 2.21.5+cuda12.4" -> "2.21.5", "12.4"
bool ParseVersion(std::string_view message, std::string* version, std::string* cuda);

// "GPU/0-7000 : GPU/0-7000 (0/5000.0/LOC) CPU/0-0 (1/24.0/PHB) NET/0-0 (3/24.0/PIX)": the GPU's
// bus id and its distance to each NET.
bool ParsePathsLine(std::string_view message, std::string* gpu, std::vector<NicDistance>* nets);

// NCCL 2.4: "CUDA Dev 0[0], Socket NIC distance :  PHB PHB"
bool ParseNicDistanceLine(std::string_view message, int* cuda_dev, std::vector<NicDistance>* nets);

// The integer after `key` in `s` ("rank 3" for key "rank "); false when absent.
bool IntAfter(std::string_view s, std::string_view key, int* value);

}  // namespace dlaunch::launcher::nccl_log
