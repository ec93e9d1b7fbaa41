// RunTrain: the rank-side driver of `dlaunch train`. The only file of the trainer that knows about
// options, data, model, DDP, checkpoints and telemetry at once.
#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <sys/resource.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <new>
#include <regex>

#ifdef DLAUNCH_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#include <torch/cuda.h>
#endif

#include "core/base/format.h"
#include "core/base/proc.h"
#include "core/comm/comm_options.h"
#include "core/comm/flight_recorder.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "core/run_dir/paths.h"
#include "core/telemetry.h"
#include "worker/train/checkpoint.h"
#include "worker/train/data_set.h"
#include "worker/train/ddp.h"
#include "worker/train/distributed_sampler.h"
#include "worker/train/models.h"
#include "worker/train/quick_preflight.h"
#include "worker/train/train.h"
#include "worker/train/train_options.h"
#include "worker/train/train_reporter.h"

namespace dlaunch::worker {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Ranks run as threads in tests share torch's global generator: model initialisation holds this so
// rank 0's weights do not depend on what other threads drew meanwhile.
std::mutex g_init_mu;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

int64_t MemTotalBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = -1;
  if (in >> key >> kb && key == "MemTotal:") return kb * 1024;
  return -1;
}

struct DeviceMemory {
  int64_t allocated = -1, reserved = -1, peak = -1, free = -1, total = -1;
};

DeviceMemory ReadDeviceMemory(bool cuda, int device) {
  DeviceMemory m;
#ifdef DLAUNCH_TORCH_CUDA
  if (cuda) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
    using c10::cuda::CUDACachingAllocator::StatType;
    const auto agg = static_cast<size_t>(StatType::AGGREGATE);
    m.allocated = stats.allocated_bytes[agg].current;
    m.reserved = stats.reserved_bytes[agg].current;
    m.peak = stats.allocated_bytes[agg].peak;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      m.free = static_cast<int64_t>(free_b);
      m.total = static_cast<int64_t>(total_b);
    }
  }
#endif
  return m;
}

// "you tried to allocate 1234 bytes" (CPU allocator) or "Tried to allocate 2.00 GiB" (CUDA).
int64_t TriedToAllocate(const std::string& message) {
  std::smatch m;
  static const std::regex cpu("tried to allocate ([0-9]+) bytes");
  static const std::regex cuda("Tried to allocate ([0-9.]+) (bytes|KiB|MiB|GiB|TiB)");
  if (std::regex_search(message, m, cpu)) return std::stoll(m[1]);
  if (std::regex_search(message, m, cuda)) {
    double v = std::stod(m[1]);
    const std::string unit = m[2];
    double scale = unit == "KiB"   ? 1024.0
                   : unit == "MiB" ? 1048576.0
                   : unit == "GiB" ? 1073741824.0
                   : unit == "TiB" ? 1099511627776.0
                                   : 1.0;
    return static_cast<int64_t>(v * scale);
  }
  return -1;
}

bool LooksLikeAllocationFailure(const std::string& message) {
  return message.find("can't allocate memory") != std::string::npos ||
         message.find("out of memory") != std::string::npos ||
         message.find("Cannot allocate memory") != std::string::npos;
}

class Trainer {
 public:
  Trainer(const TrainContext& ctx, TrainOptions opts)
      : ctx_(ctx), opts_(std::move(opts)), reporter_(ctx) {}

  // Blocks for the whole run; returns the rank's exit code.
  int Run();

 private:
  int RunOnce();
  void Setup();
  void Train();
  void Heartbeat(bool final_beat);
  void Finish();
  void SaveCheckpointNow();
  int ReportOom(const std::string& what);
  int ReportFailure(const std::string& kind, const std::string& message, int exit_code);
  torch::Tensor Batch(const std::vector<int64_t>& indices, int64_t first, torch::Tensor* labels);
  CheckpointMeta Meta() const;
  void Say(const std::string& line);

  const TrainContext& ctx_;
  TrainOptions opts_;
  TrainReporter reporter_;
  std::shared_ptr<core::Communicator> comm_;
  torch::Device device_{torch::kCPU};
  bool cuda_ = false;
  DataSet data_;
  torch::Tensor features_, labels_;
  torch::nn::Sequential model_{nullptr};
  std::unique_ptr<torch::optim::SGD> optimizer_;
  std::unique_ptr<DistributedDataParallel> ddp_;
  std::unique_ptr<DistributedSampler> sampler_;
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
  int64_t step_ = 0;  // optimizer steps completed
  core::Phase phase_ = core::Phase::kInit;
  double last_loss_ = 0;

  // Window since the last heartbeat, and totals for the end-of-run table.
  Clock::time_point window_start_;
  Clock::time_point last_beat_;
  int64_t window_steps_ = 0;
  double window_step_ms_ = 0, window_comm_ms_ = 0;
  int64_t window_bytes_ = 0;
  double total_step_ms_ = 0, total_comm_ms_ = 0;
  int64_t total_samples_ = 0;
  std::vector<double> step_ms_;
  std::mutex console_mu_;  // rank 0's console: Say() and the reporter thread's progress line
  bool live_line_ = false;
  bool preflight_failed_ = false;
  Clock::time_point train_start_;
  double telemetry_ms_ = 0;  // time spent in Heartbeat()
};

void Trainer::Say(const std::string& line) {
  if (ctx_.rank != 0 || opts_.quiet) return;
  std::lock_guard<std::mutex> lock(console_mu_);
  if (live_line_) std::cout << "\n";
  live_line_ = false;
  std::cout << "[train] " << line << std::endl;
}

CheckpointMeta Trainer::Meta() const {
  CheckpointMeta m;
  m.step = step_;
  m.seed = opts_.seed;
  m.world_size = ctx_.world_size;
  m.global_batch = opts_.batch_size * opts_.grad_accum * ctx_.world_size;
  m.model = opts_.model;
  return m;
}

void Trainer::Setup() {
  if (opts_.device == "cuda") {
#ifdef DLAUNCH_TORCH_CUDA
    if (!torch::cuda::is_available())
      throw UsageError("train: --device cuda but no GPU is visible");
    cuda_ = true;
    device_ = torch::Device(
        torch::kCUDA, static_cast<c10::DeviceIndex>(ctx_.local_rank % torch::cuda::device_count()));
#else
    throw UsageError("train: --device cuda, but this build's libtorch has no CUDA");
#endif
  }
  if (opts_.amp && !cuda_) Say("--amp ignored: bf16 autocast applies to CUDA only");

  phase_ = core::Phase::kData;
  if (opts_.data_file.empty()) {
    int64_t dim = opts_.model == "cnn" ? opts_.image_size * opts_.image_size : opts_.features;
    data_ = MakeSyntheticDataSet(opts_.samples, dim, opts_.classes, opts_.seed);
  } else {
    data_ = ReadDataSetFile(opts_.data_file);
  }
  features_ =
      torch::from_blob(data_.features.data(), {data_.size, data_.feature_dim}, torch::kFloat32);
  labels_ = torch::from_blob(data_.labels.data(), {data_.size}, torch::kInt64);
  sampler_ =
      std::make_unique<DistributedSampler>(data_.size, ctx_.rank, ctx_.world_size, opts_.seed);
  steps_per_epoch_ = sampler_->samples_per_rank() / (opts_.batch_size * opts_.grad_accum);
  if (steps_per_epoch_ == 0) {
    throw UsageError(
        "train: " + std::to_string(data_.size) + " samples over " +
        std::to_string(ctx_.world_size) + " ranks do not fill one step of --batch-size " +
        std::to_string(opts_.batch_size) + " x --grad-accum " + std::to_string(opts_.grad_accum));
  }
  total_steps_ = opts_.epochs > 0 ? opts_.epochs * steps_per_epoch_ : opts_.steps;

  phase_ = core::Phase::kInit;
  {
    std::lock_guard<std::mutex> lock(g_init_mu);
    torch::manual_seed(opts_.seed);
    model_ = MakeModel(opts_.model, {data_.feature_dim, data_.classes, opts_.hidden});
  }
  model_->to(device_);
  optimizer_ = std::make_unique<torch::optim::SGD>(
      model_->parameters(), torch::optim::SGDOptions(opts_.lr).momentum(opts_.momentum));

  core::CommOptions co;
  co.backend = opts_.backend == "auto" ? (cuda_ ? "nccl" : "gloo") : opts_.backend;
  co.rank = ctx_.rank;
  co.size = ctx_.world_size;
  if (ctx_.store) {
    co.store =
        core::MakePrefixStore("train/" + std::to_string(ctx_.restart_count) + "/comm/", ctx_.store);
  }
  co.timeout = std::chrono::milliseconds(static_cast<int64_t>(opts_.collective_timeout_s * 1000));
  co.device_index = cuda_ ? device_.index() : -1;
  if (!ctx_.rank_dir.empty()) co.flight_dump_path = rundir::RankDir(ctx_.rank_dir).flight();
  co.on_timeout = [this](const core::TimeoutReport& r) {
    try {
      reporter_.Event("timeout", json::parse(r.ToJson()));
    } catch (...) {
    }
  };
  comm_ = core::MakeCommunicator(co);
  if (ctx_.set_command_handler && !co.flight_dump_path.empty()) {
    // A weak reference: the launcher may ask for a dump after training ended.
    std::weak_ptr<core::Communicator> weak = comm_;
    ctx_.set_command_handler(
        [weak, path = co.flight_dump_path](const std::string& command, const std::string& reason) {
          auto comm = weak.lock();
          if (!comm) return;
          try {
            if (command == "dump") comm->flight_recorder().DumpJson(path, reason);
            if (command == "abort") comm->Abort();
          } catch (const std::exception&) {
            // A dump that cannot be written must not take the rank down.
          }
        });
  }

  if (opts_.preflight && ctx_.world_size > 1) {
    phase_ = core::Phase::kPreflight;
    reporter_.Status([](core::RankStatus& s) { s.phase = core::Phase::kPreflight; });
    QuickPreflightResult pf = RunQuickPreflight(*comm_, 4 << 20, co.timeout);
    reporter_.Event("preflight", {{"ok", pf.ok},
                                  {"busbw_gbps", pf.busbw_gbps},
                                  {"barrier_ms", pf.barrier_ms},
                                  {"message", pf.message}});
    if (!pf.ok) {
      preflight_failed_ = true;
      throw Error(ErrorKind::kInternal, "train: pre-flight failed: " + pf.message);
    }
    Say(pf.message);
  }

  // Every rank loads the same file (rank 0 wrote it on the shared run directory); the broadcast in
  // DDP's constructor then guarantees identical weights even if a rank could not see it.
  if (!opts_.checkpoint_dir.empty() && (opts_.resume || ctx_.restart_count > 0)) {
    phase_ = core::Phase::kCheckpoint;
    auto meta = LoadCheckpoint(opts_.checkpoint_dir, Meta(), *model_, *optimizer_);
    if (meta) {
      step_ = meta->step;
      Say("resumed from " + CheckpointPath(opts_.checkpoint_dir) + " at step " +
          std::to_string(step_));
      reporter_.Event("resumed", {{"step", step_}, {"path", CheckpointPath(opts_.checkpoint_dir)}});
    } else if (opts_.resume) {
      Say("no checkpoint in " + opts_.checkpoint_dir + ": starting from step 0");
    }
  }
  // Ranks must agree on where they start; rank 0's word counts.
  int64_t start = step_;
  comm_->Broadcast({&start, 1, core::DataType::kInt64}, 0)->Wait(co.timeout);
  step_ = start;

  DdpOptions dopts;
  dopts.bucket_cap_mb = opts_.bucket_mb;
  dopts.timeout = co.timeout;
  ddp_ = std::make_unique<DistributedDataParallel>(model_->parameters(), comm_, dopts);
  ddp_->TakeStats();  // the broadcast is set-up, not step traffic
}

torch::Tensor Trainer::Batch(const std::vector<int64_t>& indices, int64_t first,
                             torch::Tensor* labels) {
  torch::Tensor idx = torch::from_blob(const_cast<int64_t*>(indices.data()) + first,
                                       {opts_.batch_size}, torch::kInt64);
  *labels = labels_.index_select(0, idx).to(device_);
  return features_.index_select(0, idx).to(device_);
}

void Trainer::Train() {
  std::vector<int64_t> indices;
  int64_t indices_epoch = -1;
  window_start_ = last_beat_ = train_start_ = Clock::now();
  const auto interval = std::chrono::duration<double>(opts_.heartbeat_interval_s);
  Say("training " + opts_.model + " on " + std::to_string(ctx_.world_size) +
      " ranks: " + std::to_string(total_steps_) + " steps, batch " +
      std::to_string(opts_.batch_size) + " per rank x " + std::to_string(opts_.grad_accum) +
      " accumulation, " + std::to_string(ddp_->buckets().size()) + " gradient buckets");
  for (; step_ < total_steps_;) {
    if (step_ == opts_.fail_at_step && ctx_.restart_count == 0) {
      throw Error(ErrorKind::kInternal,
                  "injected failure at step " + std::to_string(step_) + " (--fail-at-step)");
    }
    auto t0 = Clock::now();
    int64_t epoch = step_ / steps_per_epoch_;
    if (epoch != indices_epoch) {
      indices = sampler_->Indices(epoch);
      indices_epoch = epoch;
    }
    int64_t pos = step_ % steps_per_epoch_;
    double loss_sum = 0;
    for (int64_t m = 0; m < opts_.grad_accum; ++m) {
      phase_ = core::Phase::kForward;
      torch::Tensor y;
      torch::Tensor x = Batch(indices, (pos * opts_.grad_accum + m) * opts_.batch_size, &y);
      std::optional<DistributedDataParallel::NoSync> no_sync;
      if (m + 1 < opts_.grad_accum) no_sync.emplace(*ddp_);
      torch::Tensor loss;
      if (opts_.amp && cuda_) {
        at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
        at::autocast::set_enabled(true);
        loss = torch::nn::functional::cross_entropy(model_->forward(x), y);
        at::autocast::set_enabled(false);
        at::autocast::clear_cache();
      } else {
        loss = torch::nn::functional::cross_entropy(model_->forward(x), y);
      }
      loss = loss / static_cast<double>(opts_.grad_accum);
      phase_ = core::Phase::kBackward;
      try {
        loss.backward();
      } catch (...) {
        ddp_->RethrowSyncError();
        throw;
      }
      loss_sum += loss.item<double>();
    }
    phase_ = core::Phase::kOptimizer;
    optimizer_->step();
    optimizer_->zero_grad();
    ++step_;
    last_loss_ = loss_sum;
    if (cuda_) {
#ifdef DLAUNCH_TORCH_CUDA
      torch::cuda::synchronize();
#endif
    }
    DdpStats st = ddp_->TakeStats();
    double ms = Ms(Clock::now() - t0);
    step_ms_.push_back(ms);
    window_steps_++;
    window_step_ms_ += ms;
    window_comm_ms_ += st.comm_wait_ms;
    window_bytes_ += st.bytes_communicated;
    total_step_ms_ += ms;
    total_comm_ms_ += st.comm_wait_ms;
    total_samples_ += opts_.batch_size * opts_.grad_accum;

    if (!opts_.checkpoint_dir.empty() && ctx_.rank == 0 &&
        ((opts_.checkpoint_every > 0 && step_ % opts_.checkpoint_every == 0) ||
         step_ == total_steps_)) {
      SaveCheckpointNow();
    }
    if (opts_.heartbeat_interval_s > 0 && Clock::now() - last_beat_ >= interval) Heartbeat(false);
  }
}

void Trainer::SaveCheckpointNow() {
  core::Phase before = phase_;
  phase_ = core::Phase::kCheckpoint;
  try {
    SaveCheckpoint(opts_.checkpoint_dir, Meta(), *model_, *optimizer_);
    reporter_.Event("checkpoint",
                    {{"step", step_}, {"path", CheckpointPath(opts_.checkpoint_dir)}});
  } catch (const dlaunch::Error& e) {
    // Training goes on: the previous checkpoint is intact, and losing the run over a full disk
    // would cost more than a stale checkpoint.
    std::cerr << "rank " << ctx_.rank << ": " << e.what() << std::endl;
    reporter_.Event("error", {{"message", e.what()}, {"step", step_}});
  }
  phase_ = before;
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
  TelemetrySample s;
  s.step = step_;
  s.total_steps = total_steps_;
  s.loss = last_loss_;
  s.phase = final_beat ? core::Phase::kDone : phase_;
  int64_t n = std::max<int64_t>(window_steps_, 1);
  s.samples_per_sec = secs > 0 ? window_steps_ * opts_.batch_size * opts_.grad_accum / secs : 0;
  s.step_ms = window_step_ms_ / n;
  s.comm_wait_ms = window_comm_ms_ / n;
  s.compute_ms = s.step_ms - s.comm_wait_ms;
  s.bytes_communicated = window_bytes_;
  s.rss_bytes = core::CurrentRssBytes();
  s.peak_rss_bytes = core::PeakRssBytes();
  DeviceMemory dm = ReadDeviceMemory(cuda_, device_.index());
  s.device_allocated_bytes = dm.allocated;
  s.device_reserved_bytes = dm.reserved;
  s.device_peak_bytes = dm.peak;
  s.device_free_bytes = dm.free;
  s.device_total_bytes = dm.total;
  json body = TelemetryJson(s);
  if (final_beat) {
    // Whole-run figures, for benchmarks and the end-of-run table.
    std::vector<double> sorted = step_ms_;
    std::sort(sorted.begin(), sorted.end());
    body["step_ms_median"] = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    body["comm_share"] = total_step_ms_ > 0 ? total_comm_ms_ / total_step_ms_ : 0;
    body["train_ms"] = Ms(now - train_start_);
    body["telemetry_ms"] = telemetry_ms_;
    body["run_samples_per_sec"] = total_step_ms_ > 0 ? total_samples_ / (total_step_ms_ / 1000) : 0;
  }
  reporter_.Status([&s](core::RankStatus& st) {
    st.step = s.step;
    st.phase = s.phase;
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
    std::string line = FormatProgressLine(s.step, s.total_steps, s.loss,
                                          s.samples_per_sec * ctx_.world_size, slowest, slowest_ms);
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

void Trainer::Finish() {
  // The closing event is written even with heartbeats off: one line per run costs nothing.
  Heartbeat(true);
  RankSummary mine;
  std::vector<double> sorted = step_ms_;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  DeviceMemory dm = ReadDeviceMemory(cuda_, device_.index());
  double local[4] = {
      cuda_ ? static_cast<double>(dm.peak) : static_cast<double>(core::PeakRssBytes()),
      total_step_ms_ > 0 ? total_comm_ms_ / total_step_ms_ : 0,
      total_step_ms_ > 0 ? total_samples_ / (total_step_ms_ / 1000) : 0, median};
  std::vector<double> all(4 * ctx_.world_size);
  comm_
      ->AllGather({local, 4, core::DataType::kFloat64},
                  {all.data(), all.size(), core::DataType::kFloat64})
      ->Wait(std::chrono::milliseconds(static_cast<int64_t>(opts_.collective_timeout_s * 1000)));
  reporter_.Flush();  // the closing event is written, the last progress line printed
  if (ctx_.rank == 0 && !opts_.quiet) {
    std::lock_guard<std::mutex> lock(console_mu_);
    std::vector<RankSummary> rows;
    for (int r = 0; r < ctx_.world_size; ++r) {
      rows.push_back({r, all[4 * r], all[4 * r + 1], all[4 * r + 2], all[4 * r + 3]});
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
  DeviceMemory dm = ReadDeviceMemory(cuda_, device_.index());
  struct rlimit lim {};
  int64_t as_limit = -1;
  if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    as_limit = static_cast<int64_t>(lim.rlim_cur);
  }
  json memory;
  if (cuda_) {
    memory = {{"allocated_bytes", dm.allocated}, {"reserved_bytes", dm.reserved},
              {"peak_bytes", dm.peak},           {"free_bytes", dm.free},
              {"total_bytes", dm.total},         {"rss_bytes", core::CurrentRssBytes()}};
  } else {
    int64_t total = MemTotalBytes();
    if (as_limit >= 0 && (total < 0 || as_limit < total)) total = as_limit;
    memory = {{"allocated_bytes", core::CurrentRssBytes()},
              {"reserved_bytes", base::ProcStatusBytes("VmSize")},
              {"peak_bytes", core::PeakRssBytes()},
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
  advice.push_back(cuda_ ? (opts_.amp ? "--amp is on already; use a smaller model"
                                      : "use --amp (bf16 autocast) to halve activation memory")
                         : "--amp (bf16 autocast) helps on CUDA devices only");
  std::string summary = "out of memory in " + std::string(core::PhaseName(phase_)) + " at step " +
                        std::to_string(step_) + " on " + (cuda_ ? "cuda" : "cpu") +
                        ", tried to allocate " + base::FormatBytes(tried, base::ByteStyle::kOneDecimal) +
                        " with " +
                        base::FormatBytes(cuda_ ? dm.allocated : core::CurrentRssBytes(),
                                          base::ByteStyle::kOneDecimal) +
                        " in use";
  json details = {{"device", cuda_ ? "cuda" : "cpu"},
                  {"step", step_},
                  {"phase", core::PhaseName(phase_)},
                  {"batch_size", opts_.batch_size},
                  {"grad_accum", opts_.grad_accum},
                  {"tried_to_allocate_bytes", tried},
                  {"memory", memory},
                  {"advice", advice},
                  {"exception", what.substr(0, 2000)}};
  std::cerr << "OOM on rank " << ctx_.rank << ": " << summary << "; try: " << advice.front()
            << std::endl;
  reporter_.Error("oom", summary, details);
  if (comm_) comm_->Abort();  // peers then fail fast instead of waiting for our gradients
  return kExitRankFailed;
}

int Trainer::ReportFailure(const std::string& kind, const std::string& message, int exit_code) {
  std::cerr << "rank " << ctx_.rank << ": train failed at step " << step_ << ": " << message
            << std::endl;
  reporter_.Error(kind, message, {{"step", step_}, {"phase", core::PhaseName(phase_)}});
  if (comm_) comm_->Abort();
  return exit_code;
}

int Trainer::Run() {
  int code = RunOnce();
  reporter_.Flush();  // posted tasks use members that go away with this object
  return code;
}

int Trainer::RunOnce() {
  try {
    Setup();
    Train();
    Finish();
    return 0;
  } catch (const UsageError& e) {
    std::cerr << e.what() << std::endl;
    return kExitUsage;
  } catch (const c10::OutOfMemoryError& e) {
    return ReportOom(e.what_without_backtrace());
  } catch (const std::bad_alloc& e) {
    return ReportOom(e.what());
  } catch (const c10::Error& e) {
    if (LooksLikeAllocationFailure(e.what_without_backtrace())) {
      return ReportOom(e.what_without_backtrace());
    }
    return ReportFailure("error", e.what_without_backtrace(), 1);
  } catch (const dlaunch::Error& e) {
    if (e.kind() == ErrorKind::kOutOfMemory) return ReportOom(e.what());
    if (e.kind() == ErrorKind::kTimeout) return ReportFailure("timeout", e.what(), kExitHang);
    if (preflight_failed_) return ReportFailure("error", e.what(), kExitUnhealthy);
    return ReportFailure("error", e.what(), kExitRankFailed);
  } catch (const std::exception& e) {
    if (LooksLikeAllocationFailure(e.what())) return ReportOom(e.what());
    return ReportFailure("error", e.what(), 1);
  }
}

}  // namespace

int RunTrain(const TrainContext& ctx, const std::vector<std::string>& args) {
  TrainOptions opts;
  try {
    opts = ParseTrainOptions(args);
  } catch (const UsageError& e) {
    std::cerr << e.what() << " (--help lists the options)" << std::endl;
    return kExitUsage;
  }
  if (opts.help) {
    std::cout << TrainOptionsHelp();
    return 0;
  }
  Trainer trainer(ctx, std::move(opts));
  return trainer.Run();
}

}  // namespace dlaunch::worker
