// Detection latency of HangMonitor with real processes: N forked ranks run a training-like loop
// whose "collectives" are a process-shared barrier (a rank that does not arrive blocks the others,
// as in a real all-reduce), keep a flight recorder, heartbeat through shared memory and answer
// dump requests (SIGUSR1) by rewriting rank<R>/flight.json. One fault is injected per run; the
// harness polls HangMonitor every 250 ms, as the launcher's supervisor does, and records when the
// diagnosis came back and whether it named the right rank and collective.
//
//   diagnose_latency [--runs 20] [--ranks 4] [--hang-timeout-ms 2000] [--heartbeat-timeout-ms 1000]
//                    [--faults never_entered,count_mismatch,...] [--out results.json]
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/base/clock.h"
#include "core/run_dir/run_dir.h"
#include "launcher/diagnose/diagnose.h"

namespace {

using dlaunch::launcher::Diagnosis;
using dlaunch::launcher::DiagnosisKindName;
using dlaunch::launcher::HangMonitor;
using dlaunch::launcher::JobView;
using dlaunch::launcher::RankLiveState;

constexpr int kMaxRanks = 16;
constexpr int kFaultSeq = 20;  // the collective the fault hits
constexpr int kFaultRank = 2;
constexpr auto kStepTime = std::chrono::milliseconds(20);

using dlaunch::base::UnixMillis;
using dlaunch::base::UnixNanos;
namespace rundir = dlaunch::rundir;

struct SharedRank {
  std::atomic<int64_t> last_started{-1};
  std::atomic<int64_t> last_completed{-1};
  std::atomic<int64_t> step{0};
  std::atomic<int> phase{0};
  std::atomic<int64_t> heartbeat_ms{0};
  std::atomic<int64_t> output_ms{0};
  std::atomic<int64_t> fault_ms{0};  // when this rank started misbehaving
  std::atomic<int> dump_generation{0};
};

// One page shared by the harness and its ranks.
struct Shared {
  pthread_barrier_t collective;  // every rank takes part
  pthread_barrier_t wrong;       // a mismatched call waits here forever
  std::atomic<int> dump_request{0};
  SharedRank ranks[kMaxRanks];
};

enum class Fault { kNeverEntered, kCountMismatch, kOpMismatch, kSigstop, kExitInside, kUnlinked };

const std::map<std::string, Fault> kFaults = {
    {"never_entered", Fault::kNeverEntered}, {"count_mismatch", Fault::kCountMismatch},
    {"op_mismatch", Fault::kOpMismatch},     {"sigstop", Fault::kSigstop},
    {"exit_inside", Fault::kExitInside},     {"unlinked_silent", Fault::kUnlinked}};

// ---- The rank process. ----

class RankProcess {
 public:
  RankProcess(Shared* shared, int rank, int world, Fault fault, rundir::RankDir dir)
      : shared_(shared),
        me_(shared->ranks[rank]),
        rank_(rank),
        world_(world),
        fault_(fault),
        dir_(std::move(dir)) {}

  [[noreturn]] void Run() {
    const bool linked = fault_ != Fault::kUnlinked;
    std::thread heartbeat;
    if (linked) heartbeat = std::thread([this] { Heartbeat(); });
    for (int64_t seq = 0;; ++seq) {
      me_.phase.store(static_cast<int>(dlaunch::core::Phase::kForward));
      std::this_thread::sleep_for(kStepTime);
      if (!linked) {
        std::printf("rank %d step %lld\n", rank_, static_cast<long long>(seq));
        std::fflush(stdout);
      }
      const bool faulty = rank_ == kFaultRank && seq == kFaultSeq;
      if (faulty && (fault_ == Fault::kNeverEntered || fault_ == Fault::kUnlinked)) {
        me_.fault_ms.store(UnixMillis());
        me_.phase.store(static_cast<int>(dlaunch::core::Phase::kData));
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
      }
      std::string op = "allreduce";
      int64_t count = 1024;
      if (faulty && fault_ == Fault::kCountMismatch) count = 2048;
      if (faulty && fault_ == Fault::kOpMismatch) op = "broadcast";
      {
        std::lock_guard<std::mutex> lock(mu_);
        rundir::FlightEntry& e = entries_.emplace_back();
        e.seq = seq;
        e.op = op;
        e.dtype = "float";
        e.count = count;
        e.bytes = count * 4;
        e.root = op == "broadcast" ? 0 : -1;
        e.state = rundir::OpState::kStarted;
        e.scheduled_unix_ns = e.started_unix_ns = UnixNanos();
      }
      me_.last_started.store(seq);
      me_.phase.store(static_cast<int>(dlaunch::core::Phase::kCommunication));
      if (faulty && (fault_ == Fault::kCountMismatch || fault_ == Fault::kOpMismatch)) {
        me_.fault_ms.store(UnixMillis());
        pthread_barrier_wait(&shared_->wrong);  // never completes: nobody else comes
      }
      if (faulty && fault_ == Fault::kExitInside) {
        me_.fault_ms.store(UnixMillis());
        WriteFlight("error");
        std::_Exit(1);
      }
      pthread_barrier_wait(&shared_->collective);
      {
        std::lock_guard<std::mutex> lock(mu_);
        rundir::FlightEntry& e = entries_.back();
        e.state = rundir::OpState::kCompleted;
        e.completed_unix_ns = UnixNanos();
        e.duration_us = (e.completed_unix_ns - e.started_unix_ns) / 1000;
      }
      me_.last_completed.store(seq);
      me_.step.store(seq);
    }
  }

 private:
  void Heartbeat() {
    int seen = 0;
    for (;;) {
      me_.heartbeat_ms.store(UnixMillis());
      int request = shared_->dump_request.load();
      if (request != seen) {
        seen = request;
        WriteFlight("request");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  void WriteFlight(const char* reason) {
    rundir::FlightDump dump;
    dump.rank = rank_;
    dump.world_size = world_;
    dump.backend = "shm";
    dump.reason = reason;
    dump.capacity = 2000;
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t first = entries_.size() > 2000 ? entries_.size() - 2000 : 0;
      dump.entries.assign(entries_.begin() + static_cast<long>(first), entries_.end());
    }
    dump.dumped_unix_ms = UnixMillis();
    rundir::WriteFlight(dir_.flight(), dump);
  }

  Shared* shared_;
  SharedRank& me_;
  int rank_, world_;
  Fault fault_;
  rundir::RankDir dir_;
  std::mutex mu_;
  std::vector<rundir::FlightEntry> entries_;
};

// ---- The launcher side. ----
class Job : public JobView {
 public:
  Job(Shared* shared, std::string run_dir, std::vector<pid_t> pids, bool linked)
      : shared_(shared), run_dir_(std::move(run_dir)), pids_(std::move(pids)), linked_(linked) {}

  std::vector<RankLiveState> Ranks() override {
    std::vector<RankLiveState> out;
    for (size_t r = 0; r < pids_.size(); ++r) {
      const SharedRank& s = shared_->ranks[r];
      RankLiveState live;
      live.rank = static_cast<int>(r);
      live.pid = pids_[r];
      live.linked = linked_;
      live.status.last_started_seq = s.last_started.load();
      live.status.last_completed_seq = s.last_completed.load();
      live.status.step = s.step.load();
      live.status.phase = static_cast<dlaunch::core::Phase>(s.phase.load());
      live.last_heartbeat_unix_ms = s.heartbeat_ms.load();
      live.last_output_unix_ms = s.output_ms.load();
      live.exited = exited_.count(static_cast<int>(r)) > 0;
      out.push_back(live);
    }
    return out;
  }
  void RequestDump(const std::string&) override { shared_->dump_request.fetch_add(1); }
  std::string run_dir() const override { return run_dir_; }

  void MarkExited(int rank) { exited_.insert(rank); }

 private:
  Shared* shared_;
  std::string run_dir_;
  std::vector<pid_t> pids_;
  bool linked_;
  std::set<int> exited_;
};

struct RunResult {
  bool detected = false;
  double latency_ms = 0;  // from the fault to the returned diagnosis
  double trigger_ms = 0;  // from the fault to the Poll call that noticed the stall
  bool culprit_ok = false;
  bool seq_ok = false;
  std::string kind;
  std::string headline;
};

RunResult RunOnce(Fault fault, int world, const HangMonitor::Options& options,
                  const std::string& run_dir) {
  std::filesystem::remove_all(run_dir);
  for (int r = 0; r < world; ++r)
    std::filesystem::create_directories(rundir::RunDir(run_dir).rank(r).path());
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  new (shared) Shared();
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&shared->collective, &attr, world);
  pthread_barrier_init(&shared->wrong, &attr, world);

  const bool linked = fault != Fault::kUnlinked;
  std::vector<pid_t> pids;
  std::vector<int> out_fds;
  for (int r = 0; r < world; ++r) {
    int fds[2];
    if (pipe(fds) != 0) std::abort();
    pid_t pid = fork();
    if (pid == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      RankProcess(shared, r, world, fault, rundir::RunDir(run_dir).rank(r)).Run();
    }
    close(fds[1]);
    pids.push_back(pid);
    out_fds.push_back(fds[0]);
  }
  // Output readers stand in for the launcher's log capture.
  std::vector<std::thread> readers;
  for (int r = 0; r < world; ++r) {
    readers.emplace_back([shared, r, fd = out_fds[r]] {
      char buf[4096];
      while (read(fd, buf, sizeof(buf)) > 0) shared->ranks[r].output_ms.store(UnixMillis());
      close(fd);
    });
  }

  Job job(shared, run_dir, pids, linked);
  HangMonitor monitor(job, options);
  RunResult result;
  int64_t stop_ms = 0;
  std::optional<Diagnosis> failure;
  const int64_t give_up = UnixMillis() + options.hang_timeout.count() + 60000;
  while (UnixMillis() < give_up) {
    if (fault == Fault::kSigstop && stop_ms == 0 &&
        shared->ranks[kFaultRank].last_completed.load() >= kFaultSeq - 1) {
      kill(pids[kFaultRank], SIGSTOP);
      stop_ms = UnixMillis();
      shared->ranks[kFaultRank].fault_ms.store(stop_ms);
    }
    for (int r = 0; r < world; ++r) {
      int status;
      if (waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      job.MarkExited(r);
      if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        // What the supervisor does on a failed rank: record the exit, analyse the run dir.
        rundir::Summary summary;
        summary.run_id = "bench";
        summary.exit_code = 1;
        for (int k = 0; k < world; ++k) {
          rundir::SummaryRank& rank = summary.ranks.emplace_back();
          rank.rank = k;
          rank.pid = pids[k];
          rank.host = "localhost";
          rank.status = k == r ? rundir::RankStatus::kFailed : rundir::RankStatus::kRunning;
          if (k == r) rank.exit_code = WEXITSTATUS(status);
          if (k == r) rank.end_unix_ms = UnixMillis();
        }
        rundir::WriteSummary(rundir::RunDir(run_dir).summary(), summary);
        Diagnosis d = dlaunch::launcher::Analyze(dlaunch::launcher::LoadRunDir(run_dir));
        failure = d;
      }
    }
    std::optional<Diagnosis> d = failure ? failure : monitor.Poll(UnixMillis());
    if (d) {
      const int64_t detected_ms = UnixMillis();
      result.detected = true;
      const int64_t fault_ms = shared->ranks[kFaultRank].fault_ms.load();
      result.latency_ms = static_cast<double>(detected_ms - fault_ms);
      // An offline analysis (after a failed exit) has no trigger time: the exit was the trigger.
      const int64_t noticed_ms = d->created_unix_ms > 0 ? d->created_unix_ms : detected_ms;
      result.trigger_ms = static_cast<double>(noticed_ms - fault_ms);
      result.culprit_ok = d->culprit_ranks == std::vector<int>{kFaultRank};
      // SIGSTOP lands between collectives or inside one; both name the stopped rank.
      result.seq_ok = fault == Fault::kUnlinked || d->seq == kFaultSeq ||
                      (fault == Fault::kSigstop && d->seq >= kFaultSeq - 1);
      result.kind = DiagnosisKindName(d->kind);
      result.headline = d->headline;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  for (pid_t pid : pids) kill(pid, SIGKILL);
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  for (std::thread& t : readers) t.join();
  munmap(shared, sizeof(Shared));
  return result;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 20, world = 4;
  HangMonitor::Options options;
  options.hang_timeout = std::chrono::milliseconds(2000);
  options.heartbeat_timeout = std::chrono::milliseconds(1000);
  options.dump_wait = std::chrono::milliseconds(2000);
  options.stack_timeout = std::chrono::seconds(10);
  options.write_files = true;
  // The launcher's --hang-on-silence: the unlinked fault is a program with neither libdlaunch nor
  // the Python agent, whose silence counts only when asked for.
  options.silence_is_hang = true;
  std::string only, out_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--runs")
      runs = std::stoi(value);
    else if (flag == "--ranks")
      world = std::stoi(value);
    else if (flag == "--hang-timeout-ms")
      options.hang_timeout = std::chrono::milliseconds(std::stoi(value));
    else if (flag == "--heartbeat-timeout-ms")
      options.heartbeat_timeout = std::chrono::milliseconds(std::stoi(value));
    else if (flag == "--faults")
      only = "," + value + ",";
    else if (flag == "--out")
      out_path = value;
    else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (world < 3 || world > kMaxRanks) {
    std::cerr << "--ranks must be 3.." << kMaxRanks << "\n";
    return 2;
  }
  const std::string run_dir =
      (std::filesystem::temp_directory_path() / ("dlaunch-latency-" + std::to_string(getpid())))
          .string();
  nlohmann::json report = {{"runs", runs},
                           {"ranks", world},
                           {"hang_timeout_ms", options.hang_timeout.count()},
                           {"heartbeat_timeout_ms", options.heartbeat_timeout.count()},
                           {"faults", nlohmann::json::object()}};
  std::printf("%-16s %5s %8s %8s %11s %10s %10s %10s %10s  %s\n", "fault", "runs", "culprit", "seq",
              "trigger_p50", "min_ms", "median_ms", "p95_ms", "max_ms", "example headline");
  for (const auto& [name, fault] : kFaults) {
    if (!only.empty() && only.find("," + name + ",") == std::string::npos) continue;
    std::vector<double> latencies, triggers;
    int culprit_ok = 0, seq_ok = 0, detected = 0;
    std::string example;
    std::map<std::string, int> kinds;
    for (int i = 0; i < runs; ++i) {
      RunResult r = RunOnce(fault, world, options, run_dir);
      if (!r.detected) continue;
      ++detected;
      latencies.push_back(r.latency_ms);
      triggers.push_back(r.trigger_ms);
      culprit_ok += r.culprit_ok;
      seq_ok += r.seq_ok;
      ++kinds[r.kind];
      if (example.empty() || !r.culprit_ok) example = r.headline;
    }
    std::printf("%-16s %2d/%-2d %5d/%-2d %5d/%-2d %11.0f %10.0f %10.0f %10.0f %10.0f  %s\n",
                name.c_str(), detected, runs, culprit_ok, runs, seq_ok, runs,
                Percentile(triggers, 0.5), Percentile(latencies, 0), Percentile(latencies, 0.5),
                Percentile(latencies, 0.95), Percentile(latencies, 1), example.c_str());
    std::fflush(stdout);
    report["faults"][name] = {
        {"detected", detected},
        {"culprit_ok", culprit_ok},
        {"seq_ok", seq_ok},
        {"kinds", kinds},
        {"trigger_ms", {{"median", Percentile(triggers, 0.5)}, {"max", Percentile(triggers, 1)}}},
        {"latency_ms",
         {{"min", Percentile(latencies, 0)},
          {"median", Percentile(latencies, 0.5)},
          {"p95", Percentile(latencies, 0.95)},
          {"max", Percentile(latencies, 1)}}},
        {"example_headline", example}};
  }
  std::filesystem::remove_all(run_dir);
  if (!out_path.empty()) std::ofstream(out_path) << report.dump(2) << "\n";
  return 0;
}
