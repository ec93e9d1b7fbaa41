// The rank of the scale harness (benchmarks/scale/run_scale.py): a small native program linked
// with libdlaunch, as a training rank looks to the launcher (a heartbeat stream, a flight
// recorder, steps and collectives) without moving data. A collective is recorded and completed at
// once, except every SCALE_BARRIER_EVERY'th step (default 0: none) and the hang step, where it is
// a barrier through the coordinator's store: each rank adds itself to the step's counter and
// waits for the last one's key. SCALE_STEP_MS between steps (default 1000); SCALE_HANG_RANK
// (default -1: none) never enters collective SCALE_HANG_STEP (default 3) and sleeps, its
// heartbeats going on, so the others wait in that barrier.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "core/base/clock.h"
#include "core/base/proc.h"
#include "core/comm/flight_recorder.h"
#include "core/error.h"
#include "core/runtime.h"

using namespace dlaunch;

int main() {
  try {
    std::unique_ptr<core::Runtime> runtime = core::Runtime::FromEnv();
    const int rank = runtime->rank();
    // Registration returns once every rank registered: the end of the rendezvous.
    std::cout << "registered " << base::UnixMillis() << std::endl;
    const int world = runtime->world_size();
    const int hang_rank = base::EnvInt("SCALE_HANG_RANK", -1);
    const int hang_step = base::EnvInt("SCALE_HANG_STEP", 3);
    const int steps = base::EnvInt("SCALE_STEPS", 1000000);
    const auto step_time = std::chrono::milliseconds(base::EnvInt("SCALE_STEP_MS", 1000));
    const int barrier_every = base::EnvInt("SCALE_BARRIER_EVERY", 0);
    core::FlightRecorder recorder(rank, world, "gloo");
    const std::string flight = runtime->rank_dir() + "/flight.json";
    runtime->OnCommand([&](core::CommandKind kind, const std::string&) {
      if (kind == core::CommandKind::kDump) recorder.DumpJson(flight, "request");
    });
    std::shared_ptr<core::Store> store = runtime->store();
    for (int step = 0; step < steps; ++step) {
      runtime->UpdateStatus([&](core::RankStatus& s) {
        s.phase = core::Phase::kForward;
        s.step = step;
      });
      std::this_thread::sleep_for(step_time);
      if (rank == hang_rank && step == hang_step) {
        std::cerr << "injected hang " << base::UnixMillis() << " before collective " << step
                  << std::endl;
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
      }
      const int64_t seq = recorder.Record("allreduce", core::DataType::kFloat32, 1024, 4096);
      recorder.Start(seq);
      runtime->UpdateStatus([&](core::RankStatus& s) {
        s.phase = core::Phase::kCommunication;
        s.last_started_seq = recorder.last_started_seq();
        s.current_op = "allreduce";
      });
      const bool barrier = step == hang_step || (barrier_every > 0 && step % barrier_every == 0);
      const std::string key = "scale/" + std::to_string(step);
      if (barrier && store->Add(key, 1) == world) store->Set(key + "/done", "1");
      // In short waits, as a backend polls its store: a hung peer keeps the others here.
      while (barrier) {
        try {
          store->Wait({key + "/done"}, std::chrono::seconds(2));
          break;
        } catch (const Error& e) {
          if (e.kind() != ErrorKind::kTimeout) throw;
        }
      }
      recorder.Complete(seq);
      runtime->UpdateStatus([&](core::RankStatus& s) {
        s.phase = core::Phase::kOptimizer;
        s.last_completed_seq = recorder.last_completed_seq();
        s.current_op.clear();
      });
    }
    recorder.DumpJson(flight, "exit");
    return 0;
  } catch (const Error& e) {
    std::cerr << "scale_rank: " << e.what() << "\n";
    return 1;
  }
}
