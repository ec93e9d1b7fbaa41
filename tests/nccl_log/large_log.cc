#include "tests/nccl_log/large_log.h"

#include <cstdio>
#include <stdexcept>
#include <string>

namespace dlaunch::launcher::nccl_log::testing {

namespace {

constexpr int kRanks = kLargeLogNodes * kLargeLogGpusPerNode;
constexpr int kChannels = 16;
constexpr int kOpsPerComm = 24;

class Writer {
 public:
  explicit Writer(const std::string& path) : f_(std::fopen(path.c_str(), "wb")) {
    if (!f_) throw std::runtime_error("cannot write " + path);
  }
  ~Writer() {
    if (f_) std::fclose(f_);
  }
  template <typename... Args>
  void Line(const char* fmt, Args... args) {
    int n = std::snprintf(buf_, sizeof(buf_), fmt, args...);
    if (n > 0) {
      std::fwrite(buf_, 1, static_cast<size_t>(n), f_);
      written_ += n;
    }
  }
  int64_t written() const { return written_; }

 private:
  std::FILE* f_;
  char buf_[512];
  int64_t written_ = 0;
};

}  // namespace

int64_t WriteLargeNcclLog(const std::string& path, int64_t bytes) {
  Writer w(path);
  auto host = [](int r) { return r / kLargeLogGpusPerNode; };
  auto pid = [](int r) { return 100000 + r * 7; };
  for (int r = 0; r < kRanks; ++r) {
    int l = r % kLargeLogGpusPerNode;
    w.Line("gpu%03d:%d:%d [%d] NCCL INFO Bootstrap : Using ib0:10.%d.0.%d<0>\n", host(r), pid(r),
           pid(r), l, host(r) / 200, host(r) % 200 + 1);
    if (r == 0) w.Line("gpu000:%d:%d [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n", pid(r), pid(r));
    w.Line(
        "gpu%03d:%d:%d [%d] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB "
        "[3]mlx5_3:1/IB [RO]; OOB ib0:10.%d.0.%d<0>\n",
        host(r), pid(r), pid(r) + 1, l, host(r) / 200, host(r) % 200 + 1);
    w.Line("gpu%03d:%d:%d [%d] NCCL INFO Using network IB\n", host(r), pid(r), pid(r) + 1, l);
  }
  for (int comm = 0; w.written() < bytes; ++comm) {
    for (int r = 0; r < kRanks; ++r) {
      int l = r % kLargeLogGpusPerNode;
      w.Line(
          "gpu%03d:%d:%d [%d] NCCL INFO ncclCommInitRank comm 0x%x%04x rank %d nranks %d cudaDev "
          "%d nvmlDev %d busId %x000 commId 0x%08x5e3a1d - Init START\n",
          host(r), pid(r), pid(r) + 1, l, 0x55f0 + r, comm, r, kRanks, l, l, 0x18 + 0x10 * l, comm);
      w.Line(
          "gpu%03d:%d:%d [%d] NCCL INFO comm 0x%x%04x rank %d nRanks %d nNodes %d localRanks %d "
          "localRank %d MNNVL 0\n",
          host(r), pid(r), pid(r) + 1, l, 0x55f0 + r, comm, r, kRanks, kLargeLogNodes,
          kLargeLogGpusPerNode, l);
    }
    for (int c = 0; c < kChannels; ++c) {
      for (int r = 0; r < kRanks; ++r) {
        int l = r % kLargeLogGpusPerNode, next = (r + 1) % kRanks;
        if (l == kLargeLogGpusPerNode - 1) {
          w.Line(
              "gpu%03d:%d:%d [%d] NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] [send] via "
              "NET/IB/%d/GDRDMA\n",
              host(r), pid(r), pid(r) + 1, l, c, r, l, next, 0, c % 4);
        } else {
          w.Line(
              "gpu%03d:%d:%d [%d] NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] via P2P/CUMEM/read\n",
              host(r), pid(r), pid(r) + 1, l, c, r, l, next, l + 1);
        }
      }
    }
    for (int r = 0; r < kRanks; ++r) {
      int l = r % kLargeLogGpusPerNode;
      w.Line("gpu%03d:%d:%d [%d] NCCL INFO Connected all rings\n", host(r), pid(r), pid(r) + 1, l);
      w.Line("gpu%03d:%d:%d [%d] NCCL INFO Connected all trees\n", host(r), pid(r), pid(r) + 1, l);
      w.Line(
          "gpu%03d:%d:%d [%d] NCCL INFO ncclCommInitRank comm 0x%x%04x rank %d nranks %d cudaDev "
          "%d nvmlDev %d busId %x000 commId 0x%08x5e3a1d - Init COMPLETE\n",
          host(r), pid(r), pid(r) + 1, l, 0x55f0 + r, comm, r, kRanks, l, l, 0x18 + 0x10 * l, comm);
    }
    for (int op = 0; op < kOpsPerComm; ++op) {
      for (int r = 0; r < kRanks; ++r) {
        int l = r % kLargeLogGpusPerNode;
        w.Line(
            "gpu%03d:%d:%d [%d] NCCL INFO AllReduce: opCount %x sendbuff 0x7f3a%08x recvbuff "
            "0x7f3a%08x count 4194304 datatype 7 op 0 root 0 comm 0x%x%04x [nranks=%d] stream "
            "0x5612c0\n",
            host(r), pid(r), pid(r), l, op, op * 4096, op * 4096, 0x55f0 + r, comm, kRanks);
      }
    }
  }
  return w.written();
}

}  // namespace dlaunch::launcher::nccl_log::testing
