// A rank program for the end-to-end diagnosis tests: gloo all-reduces under dlaunch, one per
// step, with one injected fault chosen by the environment:
//   DIAG_FAULT       none | never_entered | count | op | exit
//                    (count: the faulty rank all-reduces half as many floats)
//   DIAG_FAULT_RANK  the faulty rank (default 2)
//   DIAG_FAULT_SEQ   the collective the fault hits (default 5)
//   DIAG_TIMEOUT_MS  collective timeout (default 3000)
//   DIAG_STEPS       steps when nothing goes wrong (default 10)
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/base/files.h"
#include "core/base/proc.h"
#include "core/comm/comm_options.h"
#include "core/comm/communicator.h"
#include "core/comm/flight_recorder.h"
#include "core/error.h"
#include "core/run_dir/events_file.h"
#include "core/runtime.h"

using namespace dlaunch;

int main() {
  const char* fault_env = std::getenv("DIAG_FAULT");
  const std::string fault = fault_env ? fault_env : "none";
  const int fault_rank = base::EnvInt("DIAG_FAULT_RANK", 2);
  const int fault_seq = base::EnvInt("DIAG_FAULT_SEQ", 5);
  const auto timeout = std::chrono::milliseconds(base::EnvInt("DIAG_TIMEOUT_MS", 3000));
  const int steps = base::EnvInt("DIAG_STEPS", 10);
  // Blocked before any thread starts, so that only the dump thread below receives SIGTERM.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);
  std::unique_ptr<core::Runtime> runtime;
  try {
    runtime = core::Runtime::FromEnv();
    const std::string flight_path =
        runtime->rank_dir().empty() ? "" : runtime->rank_dir() + "/flight.json";
    core::CommOptions options;
    options.backend = "gloo";
    options.rank = runtime->rank();
    options.size = runtime->world_size();
    options.store = core::MakePrefixStore("diag-e2e/", runtime->store());
    options.timeout = timeout;
    options.flight_dump_path = flight_path;
    options.on_timeout = [&](const core::TimeoutReport& report) {
      runtime->ReportEvent(core::EventKind::kTimeout, report.ToJson());
    };
    options.exit_on_timeout = true;
    std::unique_ptr<core::Communicator> comm = core::MakeCommunicator(options);
    core::FlightRecorder& recorder = comm->flight_recorder();
    runtime->OnCommand([&](core::CommandKind kind, const std::string&) {
      if (kind == core::CommandKind::kDump && !flight_path.empty()) {
        recorder.DumpJson(flight_path, "request");
      }
    });
    // What libdlaunch itself should do: leave the flight recorder behind when the launcher tears
    // the rank down (SIGTERM), so that the analysis sees every rank's last collectives.
    std::thread([&recorder, flight_path, term] {
      int sig = 0;
      sigwait(&term, &sig);
      if (!flight_path.empty()) recorder.DumpJson(flight_path, "exit");
      std::_Exit(128 + SIGTERM);
    }).detach();
    auto set_phase = [&](core::Phase phase, int step) {
      runtime->UpdateStatus([&](core::RankStatus& s) {
        s.phase = phase;
        s.step = step;
        s.last_started_seq = recorder.last_started_seq();
        s.last_completed_seq = recorder.last_completed_seq();
        s.current_op = recorder.current_op();
      });
      runtime->ReportEvent(core::EventKind::kTelemetry,
                           nlohmann::json({{"step", step},
                                           {"phase", core::PhaseName(phase)},
                                           {"rss_bytes", base::CurrentRssBytes()}})
                               .dump());
    };
    std::vector<float> small(1024, 1.0f), half(512, 1.0f);
    for (int step = 0; step < steps; ++step) {
      const bool faulty = runtime->rank() == fault_rank && step == fault_seq;
      set_phase(core::Phase::kData, step);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (faulty && fault == "never_entered") {
        std::cerr << "rank " << fault_rank << ": injected fault: stuck in data loading\n";
        for (;;) ::pause();
      }
      if (fault == "exit" && step == fault_seq && !faulty) {
        // Arrive late, so that the faulty rank is alone inside the collective when it exits.
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
      set_phase(core::Phase::kCommunication, step);
      std::shared_ptr<core::Work> work;
      if (faulty && fault == "count") {
        work = comm->AllReduce(comm->MakeBuffer(half.data(), half.size(), core::DataType::kFloat32),
                               core::ReduceOp::kSum);
      } else if (faulty && fault == "op") {
        work = comm->Broadcast(
            comm->MakeBuffer(small.data(), small.size(), core::DataType::kFloat32), 0);
      } else {
        work =
            comm->AllReduce(comm->MakeBuffer(small.data(), small.size(), core::DataType::kFloat32),
                            core::ReduceOp::kSum);
      }
      if (faulty && fault == "exit") {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (!flight_path.empty()) recorder.DumpJson(flight_path, "error");
        std::cerr << "rank " << fault_rank << ": injected fault: exiting inside collective\n";
        std::_Exit(1);
      }
      work->Wait(timeout + std::chrono::seconds(5));
      set_phase(core::Phase::kOptimizer, step);
    }
    if (!flight_path.empty()) recorder.DumpJson(flight_path, "exit");
    runtime->UpdateStatus([](core::RankStatus& s) { s.phase = core::Phase::kDone; });
    return 0;
  } catch (const Error& e) {
    // Reported as an "error" event so that the analysis can tell fallout ("peer gone") from a
    // cause.
    std::cerr << "fault_rank: " << e.what() << "\n";
    if (runtime)
      runtime->ReportEvent(core::EventKind::kError, nlohmann::json({{"message", e.what()}}).dump());
    return 1;
  }
}
