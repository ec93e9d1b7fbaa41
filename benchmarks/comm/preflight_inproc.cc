// `dlaunch preflight` with its ranks as threads of one process over an in-memory store: the suite
// without the launcher, for benchmarking and for machines where only the library is built.
//   comm_preflight_inproc NPROC RUN_DIR [preflight options...]
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>
#include <vector>

#include "core/store.h"
#include "worker/preflight/preflight.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: comm_preflight_inproc NPROC RUN_DIR [preflight options...]\n";
    return 2;
  }
  const int n = std::atoi(argv[1]);
  const std::string run_dir = argv[2];
  std::vector<std::string> args(argv + 3, argv + argc);
  std::filesystem::create_directories(run_dir);
  auto store = dlaunch::core::MakeMemoryStore();
  std::vector<int> codes(n, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      dlaunch::worker::PreflightContext ctx;
      ctx.rank = r;
      ctx.world_size = n;
      ctx.local_rank = r;
      ctx.store = store;
      ctx.run_dir = run_dir;
      codes[r] = dlaunch::worker::RunPreflight(ctx, args);
    });
  }
  for (auto& t : threads) t.join();
  int worst = 0;
  for (int c : codes) worst = std::max(worst, c);
  return worst;
}
