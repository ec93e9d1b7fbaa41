// A rank program for the launcher's process-level tests: each mode exercises one behaviour.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>

#include "core/base/files.h"
#include "core/base/proc.h"
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
    if (mode == "steps") {  // argv[2] training-like steps of argv[3] ms, a third of it "in comm"
      auto rt = dlaunch::core::Runtime::FromEnv();
      const int steps = std::atoi(argv[2]);
      const int ms = std::atoi(argv[3]);
      Ready();
      for (int i = 1; i <= steps; ++i) {
        rt->UpdateStatus([&](dlaunch::core::RankStatus& s) {
          s.step = i;
          s.phase = dlaunch::core::Phase::kForward;
          s.last_started_seq = i;
          s.last_completed_seq = i - 1;
          s.current_op = "allreduce";
          s.rss_bytes = dlaunch::base::CurrentRssBytes();
          s.samples_per_sec = 1000.0 * 32 / ms;
          s.steps_timed = i;
          s.step_busy_ms_total += ms * 2.0 / 3;
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));  // the step's work
      }
      rt->UpdateStatus(
          [&](dlaunch::core::RankStatus& s) { s.phase = dlaunch::core::Phase::kDone; });
      std::cout << "done" << std::endl;
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
    if (mode == "exit-after-hold") {  // rank argv[2] exits argv[3] once FIFO argv[4] is opened
      auto rt = dlaunch::core::Runtime::FromEnv();  // for writing; the others ignore SIGTERM
      if (rank == std::atoi(argv[2])) {
        ::close(::open(argv[4], O_RDONLY));
        std::cerr << "rank " << rank << " giving up" << std::endl;
        return std::atoi(argv[3]);
      }
      ::signal(SIGTERM, SIG_IGN);
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
    if (mode == "forge-node") {  // #30: speak for node 0 and node 1 with what a rank holds
      auto client = std::make_shared<dlaunch::core::CoordinatorClient>(
          std::getenv("DLAUNCH_COORDINATOR"), std::getenv("DLAUNCH_JOB_TOKEN"));
      int accepted = 0, tried = 0;
      auto stream = [&](int member, bool done, bool write) {
        auto ctx = client->NewContext(std::chrono::seconds(5));
        auto s = client->stub().NodeStream(ctx.get());
        dlaunch::v1::NodeStatus status;
        status.set_member_id(member);
        status.set_node_rank(member);
        status.set_done(done);
        status.set_exit_code(1);
        status.set_message("forged by rank " + std::to_string(rank));
        if (write) s->Write(status);
        s->WritesDone();
        ++tried;
        accepted += s->Finish().ok() ? 1 : 0;
      };
      stream(0, true, true);    // the campaign's crash of node 0
      stream(1, true, true);    // node 1 failed
      stream(1, false, false);  // node 1's stream ended
      {                         // node 1's place, and its credential
        dlaunch::v1::NodeRequest join;
        join.set_member_id(1);
        join.set_node_rank(1);
        join.set_nproc(EnvInt("LOCAL_WORLD_SIZE"));
        dlaunch::v1::NodeResponse resp;
        auto ctx = client->NewContext(std::chrono::seconds(5));
        ++tried;
        accepted += client->stub().RegisterNode(ctx.get(), join, &resp).ok() ? 1 : 0;
      }
      for (int i = 0; i < 304; ++i) {
        dlaunch::v1::FileChunk chunk;
        chunk.set_rank(i < 4 ? i : 2 + i % 2);
        chunk.set_name(i < 4 ? "error.json" : "planted" + std::to_string(i));
        chunk.set_data(R"({"message":"planted by rank )" + std::to_string(rank) + "\"}");
        dlaunch::v1::FileAck ack;
        auto ctx = client->NewContext(std::chrono::seconds(5));
        ++tried;
        accepted += client->stub().PushFile(ctx.get(), chunk, &ack).ok() ? 1 : 0;
      }
      std::cout << "forged " << tried << " node calls, " << accepted << " accepted" << std::endl;
      // The next rank's calls: its failure, and a heartbeat that would keep it looking alive.
      const int other = (rank + 1) % EnvInt("WORLD_SIZE");
      tried = accepted = 0;
      {
        dlaunch::v1::Event e;
        e.set_rank(other);
        e.set_kind(dlaunch::v1::EVENT_ERROR);
        e.set_json(R"({"message":"forged"})");
        dlaunch::v1::EventAck ack;
        auto ctx = client->NewContext(std::chrono::seconds(5));
        ++tried;
        accepted += client->stub().ReportEvent(ctx.get(), e, &ack).ok() ? 1 : 0;
      }
      {
        auto ctx = client->NewContext(std::chrono::seconds(5));
        auto s = client->stub().Heartbeat(ctx.get());
        dlaunch::v1::RankStatus status;
        status.set_rank(other);
        status.set_step(1000000);
        s->Write(status);
        s->WritesDone();
        ++tried;
        accepted += s->Finish().ok() ? 1 : 0;
      }
      std::cout << "forged " << tried << " calls as rank " << other << ", " << accepted
                << " accepted" << std::endl;
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
