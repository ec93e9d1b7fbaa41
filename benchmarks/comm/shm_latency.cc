// Where a small shared-memory allreduce spends its time: the same float32 sum allreduce of
// BYTES, ITERS times on RANKS ranks, measured
//   shm_group:    on a bare ShmGroup, called on the rank's own thread;
//   communicator: through the gloo communicator, AllReduce then Wait for each op (the caller
//                 runs the op itself);
//   queued:       through the communicator, all ITERS launched back to back and then waited for
//                 (preflight's default, nccl-tests' method: the communicator's thread starts on
//                 them, and the caller, once it waits, runs the rest itself).
// Ranks are forked processes (MODE=processes, as dlaunch and mpirun start them) or threads of
// this process (MODE=threads). Prints one JSON line per layer: the median over REPEATS runs of the
// slowest rank's microseconds per op.
//
// usage: comm_shm_latency [RANKS=4] [BYTES=1024] [ITERS=2000] [REPEATS=5] [MODE=processes]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>
#include <vector>

#include "core/comm/comm_options.h"
#include "core/comm/shm_group.h"
#include "core/store.h"
#include "tests/comm/file_store.h"

namespace {

using namespace dlaunch::core;
using Clock = std::chrono::steady_clock;
constexpr auto kForever = std::chrono::seconds(60);

struct Setup {
  int ranks;
  size_t count;
  int iters;
};

double Micros(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double BareShm(const Setup& s, int r, const std::shared_ptr<Store>& store) {
  ShmGroupOptions o;
  o.local_rank = r;
  for (int i = 0; i < s.ranks; ++i) o.world_ranks.push_back(i);
  o.store = MakePrefixStore("bare/", store);
  ShmGroup g(o);
  g.Attach();
  std::vector<float> buf(s.count, 1.0f);
  g.Barrier(Clock::now() + kForever);
  const auto t0 = Clock::now();
  for (int i = 0; i < s.iters; ++i) {
    g.AllReduce(buf.data(), s.count, DataType::kFloat32, ReduceOp::kSum, 0, -1,
                Clock::now() + kForever);
  }
  const double us = Micros(t0);
  g.Barrier(Clock::now() + kForever);
  g.Detach();
  return us;
}

double ThroughComm(const Setup& s, int r, const std::shared_ptr<Store>& store, bool queued) {
  CommOptions o;
  o.backend = "gloo";
  o.rank = r;
  o.size = s.ranks;
  o.store = MakePrefixStore(queued ? "queued/" : "comm/", store);
  o.transport = "shm";
  o.timeout = kForever;
  auto c = MakeCommunicator(o);
  std::vector<float> buf(s.count, 1.0f);
  c->Barrier()->Wait(kForever);
  const auto t0 = Clock::now();
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < s.iters; ++i) {
    auto w = c->AllReduce({buf.data(), s.count}, ReduceOp::kSum);
    if (queued) {
      works.push_back(w);
    } else {
      w->Wait(kForever);
    }
  }
  for (auto& w : works) w->Wait(kForever);
  const double us = Micros(t0);
  c->Barrier()->Wait(kForever);
  return us;
}

// Runs layer(rank, store) on every rank; returns the slowest rank's microseconds per op.
double OnRanks(const Setup& s, bool processes,
               const std::function<double(int, const std::shared_ptr<Store>&)>& layer) {
  std::vector<double> us(s.ranks);
  if (!processes) {
    auto store = MakeMemoryStore();
    std::vector<std::thread> threads;
    for (int r = 0; r < s.ranks; ++r) threads.emplace_back([&, r] { us[r] = layer(r, store); });
    for (auto& t : threads) t.join();
  } else {
    char dir[] = "/tmp/dlaunch-shm-latency-XXXXXX";
    if (!mkdtemp(dir)) return -1;
    std::vector<int> fds;
    std::vector<pid_t> pids;
    for (int r = 0; r < s.ranks; ++r) {
      int p[2];
      if (pipe(p) != 0) return -1;
      pid_t pid = fork();
      if (pid == 0) {
        close(p[0]);
        double v = layer(r, std::make_shared<testing::FileStore>(dir));
        (void)!write(p[1], &v, sizeof v);
        std::_Exit(0);
      }
      close(p[1]);
      fds.push_back(p[0]);
      pids.push_back(pid);
    }
    for (int r = 0; r < s.ranks; ++r) {
      if (read(fds[r], &us[r], sizeof(double)) != sizeof(double)) us[r] = -1;
      close(fds[r]);
      waitpid(pids[r], nullptr, 0);
    }
    std::filesystem::remove_all(dir);
  }
  return *std::max_element(us.begin(), us.end()) / s.iters;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Setup s;
  s.ranks = argc > 1 ? std::atoi(argv[1]) : 4;
  const size_t bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024;
  s.count = std::max<size_t>(bytes / sizeof(float), 1);
  s.iters = argc > 3 ? std::atoi(argv[3]) : 2000;
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 5;
  const bool processes = argc <= 5 || std::strcmp(argv[5], "threads") != 0;

  std::vector<double> bare, comm, queued;
  for (int rep = 0; rep < repeats; ++rep) {
    bare.push_back(OnRanks(s, processes, [&](int r, auto store) { return BareShm(s, r, store); }));
    comm.push_back(
        OnRanks(s, processes, [&](int r, auto store) { return ThroughComm(s, r, store, false); }));
    queued.push_back(
        OnRanks(s, processes, [&](int r, auto store) { return ThroughComm(s, r, store, true); }));
  }
  const char* mode = processes ? "processes" : "threads";
  for (auto [layer, v] :
       {std::pair{"shm_group", &bare}, {"communicator", &comm}, {"queued", &queued}}) {
    std::printf(
        "{\"layer\": \"%s\", \"mode\": \"%s\", \"ranks\": %d, \"bytes\": %zu, \"us_per_op\": "
        "%.2f, \"min\": %.2f, \"max\": %.2f}\n",
        layer, mode, s.ranks, bytes, Median(*v), *std::min_element(v->begin(), v->end()),
        *std::max_element(v->begin(), v->end()));
  }
  return 0;
}
