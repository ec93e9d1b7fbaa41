#include "core/comm/link_paths.h"

#include <cstring>
#include <map>

namespace dlaunch::core {
namespace {

const char* const kPaths[] = {"tcp", "shm", "nccl"};

uint8_t Code(const char* path) {
  for (uint8_t i = 0; i < 3; ++i) {
    if (std::strcmp(path, kPaths[i]) == 0) return i;
  }
  return 0;
}

}  // namespace

LinkPaths GatherLinkPaths(Communicator& comm, std::chrono::milliseconds timeout) {
  const int n = comm.size();
  std::vector<uint8_t> mine(n), all(static_cast<size_t>(n) * n);
  for (int peer = 0; peer < n; ++peer) mine[peer] = Code(comm.CollectivePath(peer));
  auto in = comm.Allocate(mine.size());
  auto out = comm.Allocate(all.size());
  Buffer in_buf = comm.MakeBuffer(in.get(), mine.size(), DataType::kUint8);
  Buffer out_buf = comm.MakeBuffer(out.get(), all.size(), DataType::kUint8);
  comm.CopyIn(in_buf, mine.data());
  comm.AllGather(in_buf, out_buf)->Wait(timeout);
  comm.CopyOut(all.data(), out_buf);
  LinkPaths paths;
  paths.collectives.assign(n, std::vector<std::string>(n));
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) paths.collectives[s][d] = kPaths[all[s * n + d] % 3];
  }
  return paths;
}

std::string LinkPaths::Summary() const {
  constexpr size_t kMaxPairs = 24;
  std::map<std::string, std::vector<std::string>> pairs;
  for (size_t s = 0; s < collectives.size(); ++s) {
    for (size_t d = s + 1; d < collectives.size(); ++d) {
      pairs[collectives[s][d]].push_back(std::to_string(s) + "-" + std::to_string(d));
    }
  }
  std::string out;
  for (const auto& [path, list] : pairs) {
    out += (out.empty() ? "" : "; ") + path;
    for (size_t i = 0; i < list.size() && i < kMaxPairs; ++i) out += " " + list[i];
    if (list.size() > kMaxPairs) out += " (+" + std::to_string(list.size() - kMaxPairs) + ")";
  }
  return out.empty() ? "none" : out;
}

nlohmann::json LinkPaths::ToJson() const {
  return {{"collectives", collectives}, {"p2p", collectives}};
}

}  // namespace dlaunch::core
