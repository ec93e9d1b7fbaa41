// Runs one training rank under an address-space limit so that a large batch fails to allocate:
//   train_oom_child RANK_DIR LIMIT_MB TRAIN_ARGS...
// The limit is added on top of what the process already maps, so torch's own start-up fits.
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "worker/train/train.h"

namespace {

long long VmSizeBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoll(line.substr(7)) * 1024;
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s RANK_DIR LIMIT_MB TRAIN_ARGS...\n", argv[0]);
    return 2;
  }
  dlaunch::worker::TrainContext ctx;
  ctx.rank_dir = argv[1];
  std::vector<std::string> args(argv + 3, argv + argc);
  struct rlimit lim;
  lim.rlim_cur = lim.rlim_max = VmSizeBytes() + std::atoll(argv[2]) * 1024 * 1024;
  if (setrlimit(RLIMIT_AS, &lim) != 0) {
    std::perror("setrlimit");
    return 2;
  }
  return dlaunch::worker::RunTrain(ctx, args);
}
