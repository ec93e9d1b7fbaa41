// A rank program for the launcher's process-level tests: each mode exercises one behaviour.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "core/coordinator_client.h"
#include "core/error.h"
#include "core/runtime.h"

namespace {

int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

void Ready() { std::cout << "ready " << ::getpid() << std::endl; }

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const int rank = EnvInt("RANK");
  try {
    if (mode == "env") {
      for (const char* k :
           {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
            "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_RUN_ID", "OMP_NUM_THREADS",
            "DLAUNCH_COORDINATOR", "DLAUNCH_JOB_TOKEN", "DLAUNCH_RANK_DIR", "NCCL_DEBUG",
            "NCCL_DEBUG_FILE", "NCCL_SOCKET_IFNAME", "EXTRA"}) {
        const char* v = std::getenv(k);
        std::cout << k << "=" << (v ? v : "<unset>") << "\n";
      }
      return 0;
    }
    if (mode == "register") {  // rendezvous, then a store round trip with every other rank
      auto rt = dlaunch::core::Runtime::FromEnv();
      auto store = rt->store();
      store->Set("hello/" + std::to_string(rt->rank()), "from " + std::to_string(rt->rank()));
      int64_t arrived = store->Add("arrived", 1);
      for (int r = 0; r < rt->world_size(); ++r) {
        store->Get("hello/" + std::to_string(r), std::chrono::seconds(30));
      }
      std::cout << "registered rank " << rt->rank() << " of " << rt->world_size() << " local "
                << rt->local_rank() << " arrived " << arrived << std::endl;
      return 0;
    }
    if (mode == "register-except") {  // rank argv[2] never registers
      if (rank == std::atoi(argv[2])) {
        Ready();
        ::pause();
        return 0;
      }
      auto rt = dlaunch::core::Runtime::FromEnv();
      return 0;
    }
    if (mode == "sleep") {  // wait to be killed
      Ready();
      for (;;) ::pause();
    }
    if (mode == "exit-after") {  // rank argv[2] exits with argv[3] once all ranks are up
      auto rt = dlaunch::core::Runtime::FromEnv();
      if (rank == std::atoi(argv[2])) {
        std::cerr << "rank " << rank << " giving up" << std::endl;
        return std::atoi(argv[3]);
      }
      Ready();
      for (;;) ::pause();
    }
    if (mode == "signals") {  // report each forwarded signal; exit 0 on SIGTERM
      // Blocked and taken with sigwaitinfo, so a signal arriving right after "ready" is not lost.
      sigset_t set;
      sigemptyset(&set);
      for (int s : {SIGUSR1, SIGUSR2, SIGHUP, SIGTERM, SIGINT}) sigaddset(&set, s);
      ::sigprocmask(SIG_BLOCK, &set, nullptr);
      Ready();
      for (;;) {
        int sig = ::sigwaitinfo(&set, nullptr);
        if (sig < 0) continue;
        std::cout << "got " << sigabbrev_np(sig) << std::endl;
        if (sig == SIGTERM || sig == SIGINT) return 0;
      }
    }
    if (mode == "spam") {  // many long lines, written in odd-sized pieces
      const int lines = std::atoi(argv[2]);
      std::string payload(200 + rank * 37, static_cast<char>('a' + rank));
      for (int i = 0; i < lines; ++i) {
        std::string line = "R" + std::to_string(rank) + " " + std::to_string(i) + " " + payload +
                           " end" + std::to_string(rank) + "\n";
        size_t half = line.size() / 2;
        (void)!::write(1, line.data(), half);
        (void)!::write(1, line.data() + half, line.size() - half);
      }
      return 0;
    }
    if (mode == "wrong-token") {
      auto store =
          dlaunch::core::MakeCoordinatorStore(std::make_shared<dlaunch::core::CoordinatorClient>(
              std::getenv("DLAUNCH_COORDINATOR"), "not-the-token"));
      try {
        store->Set("intruder", "x");
      } catch (const dlaunch::Error& e) {
        std::cout << "refused: " << dlaunch::ErrorKindName(e.kind()) << std::endl;
        return 0;
      }
      std::cout << "accepted" << std::endl;
      return 1;
    }
  } catch (const dlaunch::Error& e) {
    std::cerr << "test_rank " << rank << ": " << dlaunch::ErrorKindName(e.kind()) << ": "
              << e.what() << std::endl;
    return 1;
  }
  std::cerr << "test_rank: unknown mode '" << mode << "'" << std::endl;
  return 2;
}
