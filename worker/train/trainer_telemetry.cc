// The trainer's telemetry: memory checkpoints per phase, heartbeats, the closing table, and the
// reports of a failed rank (OOM naming its phase, NaN loss, errors).
#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "core/base/format.h"
#include "core/base/proc.h"
#include "core/comm/flight_recorder.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "core/run_dir/events_file.h"
#include "worker/train/trainer.h"

namespace dlaunch::worker {
namespace {

using nlohmann::json;

// Every step's memory is read for the first steps (where allocations settle), then sampled.
constexpr int64_t kMemoryEveryStepUntil = 10;
// Collective start times one heartbeat carries at most: more than a beat's worth at 100 steps/s.
constexpr int64_t kMaxArrivals = 256;

}  // namespace

const char* MemoryPhaseName(MemoryPhase phase) {
  switch (phase) {
    case MemoryPhase::kData:
      return "data";
    case MemoryPhase::kForward:
      return "forward";
    case MemoryPhase::kBackward:
      return "backward";
    case MemoryPhase::kOptimizer:
      return "optimizer";
    case MemoryPhase::kCount:
      break;
  }
  return "unknown";
}

std::string Trainer::PhaseLabel() const {
  std::string name = core::PhaseName(phase_);
  return evaluating_ ? "evaluation " + name : name;
}

void Trainer::StartMemoryCheckpoints() {
  memory_sampled_ =
      opts_.memory_every > 0 && (step_ < kMemoryEveryStepUntil || step_ % opts_.memory_every == 0);
}

void Trainer::SayTraining() {
  const int threads = at::get_num_threads();
  Say("training " + opts_.model + " on " + train_.name + " (" + std::to_string(train_.size) +
      " samples) on " + std::to_string(ctx_.world_size) + " ranks (" + std::to_string(threads) +
      " CPU thread" + (threads == 1 ? "" : "s") + " each): " + std::to_string(total_steps_) +
      " steps, batch " + std::to_string(opts_.batch_size) + " per rank x " +
      std::to_string(opts_.grad_accum) + " accumulation, " +
      std::to_string(ddp_->buckets().size()) + " gradient buckets");
}

void Trainer::MemoryCheckpoint(MemoryPhase phase) {
  if (!memory_sampled_) return;
  auto t0 = Clock::now();
  rundir::MemoryFigures m = ReadMemory(cuda_ ? device_.index() : -1);
  memory_[static_cast<size_t>(phase)] = m;
  last_memory_ = m;
  last_memory_phase_ = phase;
  memory_ms_ += Ms(Clock::now() - t0);
}

void Trainer::PostMemoryCheckpoints() {
  if (!memory_sampled_) return;
  auto t0 = Clock::now();
  json phases = json::object();
  int64_t rss = 0, allocated = -1, reserved = -1;
  for (size_t i = 0; i < memory_.size(); ++i) {
    const rundir::MemoryFigures& m = memory_[i];
    phases[MemoryPhaseName(static_cast<MemoryPhase>(i))] = rundir::MemoryFiguresJson(m);
    rss = std::max(rss, m.rss_bytes);
    allocated = std::max(allocated, m.device_allocated_bytes);
    reserved = std::max(reserved, m.device_reserved_bytes);
  }
  const double secs = std::chrono::duration<double>(t0 - memory_window_start_).count();
  // "counters" become Perfetto counter tracks in trace.json: {track: {series: value}}.
  json memory = {{"rss MiB", rss / 1048576.0}};
  if (allocated >= 0) {
    memory["allocated MiB"] = allocated / 1048576.0;
    memory["reserved MiB"] = reserved / 1048576.0;
  }
  json counters = {{"memory", memory},
                   {"throughput", {{"samples/s", secs > 0 ? memory_window_samples_ / secs : 0.0}}}};
  memory_window_samples_ = 0;
  memory_window_start_ = t0;
  memory_sampled_ = false;
  reporter_.Post(
      [this, body = json{{"step", step_},
                         {"phases", std::move(phases)},
                         {"counters", std::move(counters)}}] { reporter_.Event("memory", body); });
  memory_ms_ += Ms(Clock::now() - t0);
}

void Trainer::Heartbeat(bool final_beat) {
  auto now = Clock::now();
  // What telemetry itself costs the run (events, status, store round trips, the console line),
  // measured rather than inferred from noisy step times.
  struct Timer {
    double& total;
    Clock::time_point start = Clock::now();
    ~Timer() { total += Ms(Clock::now() - start); }
  } timer{telemetry_ms_};
  double secs = std::chrono::duration<double>(now - window_start_).count();
  rundir::TelemetrySample s;
  static_cast<rundir::MemoryFigures&>(s) = ReadMemory(cuda_ ? device_.index() : -1);
  s.step = step_;
  s.total_steps = total_steps_;
  s.loss = last_loss_;
  const core::Phase phase = final_beat ? core::Phase::kDone : phase_;
  s.phase = core::PhaseName(phase);
  int64_t n = std::max<int64_t>(window_steps_, 1);
  s.samples_per_sec = secs > 0 ? window_steps_ * opts_.batch_size * opts_.grad_accum / secs : 0;
  s.step_ms = window_step_ms_ / n;
  s.comm_wait_ms = window_comm_ms_ / n;
  s.compute_ms = s.step_ms - s.comm_wait_ms;
  s.bytes_communicated = window_bytes_;
  if (window_correct_.defined() && window_seen_ > 0) {
    s.train_accuracy = window_correct_.item<double>() / static_cast<double>(window_seen_);
  }
  json body = rundir::TelemetryToJson(s);
  window_correct_ = torch::Tensor();
  window_seen_ = 0;
  if (final_beat) {
    // Whole-run figures, for benchmarks and the end-of-run table.
    std::vector<double> sorted = step_ms_;
    std::sort(sorted.begin(), sorted.end());
    body["step_ms_median"] = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    body["comm_share"] = total_step_ms_ > 0 ? total_comm_ms_ / total_step_ms_ : 0;
    body["train_ms"] = Ms(now - train_start_);
    body["telemetry_ms"] = telemetry_ms_;
    body["memory_checkpoint_ms"] = memory_ms_;
    body["run_samples_per_sec"] = total_step_ms_ > 0 ? total_samples_ / (total_step_ms_ / 1000) : 0;
  }
  const int64_t steps_timed = static_cast<int64_t>(step_ms_.size());
  const double busy_ms = total_step_ms_ - total_comm_ms_;
  reporter_.Status([&s, phase, steps_timed, busy_ms](core::RankStatus& st) {
    st.step = s.step;
    st.steps_timed = steps_timed;
    st.step_busy_ms_total = busy_ms;
    st.phase = phase;
    st.loss = s.loss;
    st.samples_per_sec = s.samples_per_sec;
    st.rss_bytes = s.rss_bytes;
    st.peak_rss_bytes = s.peak_rss_bytes;
    st.device_allocated_bytes = s.device_allocated_bytes;
    st.device_reserved_bytes = s.device_reserved_bytes;
    st.device_peak_bytes = s.device_peak_bytes;
  });
  // Round trips to the coordinator happen on the reporter's thread, off the training step.
  reporter_.Post([this, body = std::move(body), s, final_beat] {
    reporter_.Event("telemetry", body);
    // The slowest rank comes through the store: a collective here would force every rank to
    // beat at the same step, and a slow rank is exactly the one that would make that wait.
    if (!ctx_.store || final_beat) return;
    const std::string prefix = "train/" + std::to_string(ctx_.restart_count) + "/step_ms/";
    ctx_.store->Set(prefix + std::to_string(ctx_.rank), std::to_string(s.step_ms));
    if (ctx_.rank != 0 || opts_.quiet) return;
    int slowest = 0;
    double slowest_ms = s.step_ms;
    for (int r = 1; r < ctx_.world_size; ++r) {
      const std::string key = prefix + std::to_string(r);
      if (!ctx_.store->Check(key)) continue;
      double v = std::stod(ctx_.store->Get(key, std::chrono::seconds(1)));
      if (v > slowest_ms) slowest = r, slowest_ms = v;
    }
    std::string line =
        FormatProgressLine(s.step, s.total_steps, s.loss, s.samples_per_sec * ctx_.world_size,
                           slowest, slowest_ms, s.train_accuracy);
    std::lock_guard<std::mutex> lock(console_mu_);
    if (isatty(STDOUT_FILENO)) {
      std::cout << "\r[train] " << line << "\x1b[K" << std::flush;
      live_line_ = true;
    } else {
      std::cout << "[train] " << line << std::endl;
    }
  });
  window_start_ = last_beat_ = now;
  window_steps_ = 0;
  window_step_ms_ = window_comm_ms_ = 0;
  window_bytes_ = 0;
}

void Trainer::StartSeqBeat() {
  if (!ctx_.update_status || seq_beat_.joinable()) return;
  // As often as the heartbeat goes out (DLAUNCH_HEARTBEAT_MS), so each beat carries fresh seqs.
  const char* env = std::getenv("DLAUNCH_HEARTBEAT_MS");
  const int64_t ms = std::clamp<int64_t>(env ? std::atoll(env) : 1000, 50, 1000);
  seq_beat_ = std::thread([this, comm = comm_, every = std::chrono::milliseconds(ms)] {
    const core::FlightRecorder& flight = comm->flight_recorder();
    std::unique_lock<std::mutex> lock(seq_beat_mu_);
    while (!seq_beat_cv_.wait_for(lock, every, [this] { return seq_beat_stop_; })) {
      const int64_t started = flight.last_started_seq();
      const int64_t completed = flight.last_completed_seq();
      const std::string op = flight.current_op();
      // Start times of the newest kMaxArrivals collectives entered, for the launcher's
      // last-to-enter count. Each beat repeats those of the last: a status that is replaced
      // before its heartbeat went out loses none, and the launcher ignores repeats.
      int64_t first_seq = -1;
      std::vector<int64_t> arrivals;
      for (int64_t seq = std::max<int64_t>(0, started - kMaxArrivals + 1); seq <= started; ++seq) {
        const auto e = flight.Get(seq);
        if (!e || e->collective_seq < 0) continue;
        if (first_seq < 0) first_seq = e->collective_seq;
        const size_t at = static_cast<size_t>(e->collective_seq - first_seq);
        if (e->collective_seq < first_seq || at > 4 * kMaxArrivals) continue;
        arrivals.resize(std::max(arrivals.size(), at + 1), 0);
        arrivals[at] = e->started_unix_ns / 1000;
      }
      reporter_.Status([&](core::RankStatus& st) {
        st.last_started_seq = started;
        st.last_completed_seq = completed;
        st.current_op = op;
        st.arrivals_first_seq = first_seq;
        st.arrival_unix_us = std::move(arrivals);
        // Inside a collective the rank communicates, whatever phase its step is in.
        if (started > completed) st.phase = core::Phase::kCommunication;
      });
    }
  });
}

void Trainer::StopSeqBeat() {
  {
    std::lock_guard<std::mutex> lock(seq_beat_mu_);
    seq_beat_stop_ = true;
  }
  seq_beat_cv_.notify_all();
  if (seq_beat_.joinable()) seq_beat_.join();
}

void Trainer::Finish() {
  // The closing event is written even with heartbeats off: one line per run costs nothing.
  Heartbeat(true);
  std::vector<double> sorted = step_ms_;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  rundir::MemoryFigures m = ReadMemory(cuda_ ? device_.index() : -1);
  constexpr int kFields = 6;
  double local[kFields] = {static_cast<double>(cuda_ ? m.device_allocated_bytes : m.rss_bytes),
                           static_cast<double>(cuda_ ? m.device_reserved_bytes : -1),
                           static_cast<double>(cuda_ ? m.device_peak_bytes : m.peak_rss_bytes),
                           total_step_ms_ > 0 ? total_comm_ms_ / total_step_ms_ : 0,
                           total_step_ms_ > 0 ? total_samples_ / (total_step_ms_ / 1000) : 0,
                           median};
  std::vector<double> all(kFields * ctx_.world_size);
  comm_
      ->AllGather({local, kFields, core::DataType::kFloat64},
                  {all.data(), all.size(), core::DataType::kFloat64})
      ->Wait(timeout_);
  reporter_.Flush();  // the closing event is written, the last progress line printed
  if (ctx_.rank == 0 && !opts_.quiet) {
    std::lock_guard<std::mutex> lock(console_mu_);
    std::vector<RankSummary> rows;
    for (int r = 0; r < ctx_.world_size; ++r) {
      const double* v = &all[kFields * r];
      rows.push_back({r, v[0], v[1], v[2], v[3], v[4], v[5]});
    }
    if (live_line_) std::cout << "\n";
    live_line_ = false;
    char line[128];
    std::snprintf(line, sizeof line, "done: %lld steps, final loss %.4f",
                  static_cast<long long>(step_), last_loss_);
    std::cout << "[train] " << line << "\n"
              << FormatRankTable(rows, cuda_ ? "cuda" : "cpu") << std::flush;
  }
  reporter_.Status([this](core::RankStatus& st) {
    st.step = step_;
    st.phase = core::Phase::kDone;
  });
}

int Trainer::ReportOom(const std::string& what) {
  int64_t tried = TriedToAllocate(what);
  rundir::MemoryFigures dm = ReadMemory(cuda_ ? device_.index() : -1);
  struct rlimit lim {};
  int64_t as_limit = -1;
  if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    as_limit = static_cast<int64_t>(lim.rlim_cur);
  }
  json memory;
  if (cuda_) {
    memory = {{"allocated_bytes", dm.device_allocated_bytes},
              {"reserved_bytes", dm.device_reserved_bytes},
              {"peak_bytes", dm.device_peak_bytes},
              {"free_bytes", dm.device_free_bytes},
              {"total_bytes", dm.device_total_bytes},
              {"rss_bytes", dm.rss_bytes}};
  } else {
    int64_t total = MemTotalBytes();
    if (as_limit >= 0 && (total < 0 || as_limit < total)) total = as_limit;
    memory = {{"allocated_bytes", dm.rss_bytes},
              {"reserved_bytes", base::ProcStatusBytes("VmSize")},
              {"peak_bytes", dm.peak_rss_bytes},
              {"total_bytes", total},
              {"address_space_limit_bytes", as_limit}};
  }
  std::vector<std::string> advice;
  if (opts_.batch_size > 1) {
    int64_t half = std::max<int64_t>(opts_.batch_size / 2, 1);
    advice.push_back("lower --batch-size (now " + std::to_string(opts_.batch_size) + "), e.g. " +
                     std::to_string(half));
    advice.push_back("keep the global batch with --batch-size " + std::to_string(half) +
                     " --grad-accum " + std::to_string(opts_.grad_accum * 2));
  }
  advice.push_back(opts_.amp != "off" ? "--amp is on already; use a smaller model"
                                      : "use --amp (bf16 autocast) to halve activation memory");
  const std::string phase = PhaseLabel();
  std::string summary = "out of memory in " + phase + " at step " + std::to_string(step_) + " on " +
                        (cuda_ ? "cuda" : "cpu") + ", tried to allocate " +
                        base::FormatBytes(tried, base::ByteStyle::kOneDecimal) + " with " +
                        base::FormatBytes(cuda_ ? dm.device_allocated_bytes : dm.rss_bytes,
                                          base::ByteStyle::kOneDecimal) +
                        " in use";
  json details = {{"device", cuda_ ? "cuda" : "cpu"},
                  {"step", step_},
                  {"phase", phase},
                  {"batch_size", opts_.batch_size},
                  {"grad_accum", opts_.grad_accum},
                  {"tried_to_allocate_bytes", tried},
                  {"memory", memory},
                  {"advice", advice},
                  {"exception", what.substr(0, 2000)}};
  if (last_memory_.rss_bytes >= 0) {
    json last = rundir::MemoryFiguresJson(last_memory_);
    last["after"] = MemoryPhaseName(last_memory_phase_);
    details["last_memory_checkpoint"] = last;
  }
  std::cerr << "OOM on rank " << ctx_.rank << ": " << summary << "; try: " << advice.front()
            << std::endl;
  reporter_.Error("oom", summary, details);
  if (comm_) comm_->Abort();  // peers then fail fast instead of waiting for our gradients
  return kExitRankFailed;
}

int Trainer::ReportFailure(const std::string& kind, const std::string& message, int exit_code) {
  if (kind == "nan") {
    std::cerr << "rank " << ctx_.rank << ": " << message << "; stopping the job" << std::endl;
  } else {
    std::cerr << "rank " << ctx_.rank << ": train failed at step " << step_ << ": " << message
              << std::endl;
  }
  reporter_.Error(kind, message, {{"step", step_}, {"phase", PhaseLabel()}});
  if (comm_) comm_->Abort();
  return exit_code;
}

}  // namespace dlaunch::worker
