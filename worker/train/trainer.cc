// RunTrain: set-up, the training step, distributed evaluation and checkpoints of `dlaunch train`.
// Longer than 600 lines, and kept whole: every part here needs torch's headers (~20 s of build per
// file), and the Trainer's methods share its state; the torch-free parts already live in their own
// files.
#include <ATen/autocast_mode.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>
#include <signal.h>
#include <torch/nn/functional/loss.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <new>
#include <random>

#ifdef DLAUNCH_TORCH_CUDA
#include <torch/cuda.h>
#endif
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "core/comm/comm_options.h"
#include "core/comm/flight_recorder.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "core/run_dir/paths.h"
#include "worker/train/models.h"
#include "worker/train/quick_preflight.h"
#include "worker/train/trainer.h"

namespace dlaunch::worker {

std::atomic<bool> g_checkpoint_requested{false};

namespace {

using nlohmann::json;
namespace F = torch::nn::functional;

// Ranks run as threads in tests share torch's global generator: model initialisation holds this so
// rank 0's weights do not depend on what other threads drew meanwhile.
std::mutex g_init_mu;

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

double Ms(Trainer::Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

Trainer::Trainer(const TrainContext& ctx, TrainOptions opts)
    : ctx_(ctx), opts_(std::move(opts)), reporter_(ctx) {}

void Trainer::Say(const std::string& line) {
  if (ctx_.rank != 0 || opts_.quiet) return;
  std::lock_guard<std::mutex> lock(console_mu_);
  if (live_line_) std::cout << "\n";
  live_line_ = false;
  std::cout << "[train] " << line << std::endl;
}

CheckpointManifest Trainer::Meta() const {
  CheckpointManifest m;
  m.step = step_;
  m.total_steps = total_steps_;
  m.steps_per_epoch = steps_per_epoch_;
  m.steps_option = opts_.steps;
  m.seed = opts_.seed;
  m.world_size = ctx_.world_size;
  m.per_rank_batch = opts_.batch_size * opts_.grad_accum;
  m.global_batch = m.per_rank_batch * ctx_.world_size;
  m.key = {opts_.model, train_.feature_dim, train_.classes,
           opts_.model == "mlp" ? opts_.hidden : int64_t{0}};
  return m;
}

void Trainer::LoadData() {
  phase_ = core::Phase::kData;
  DataSource src = ResolveDataSource(opts_);
  if (src.kind == DataSource::Kind::kIdx) {
    TrainTestData d = LoadIdxDataSet(src.path);
    train_ = std::move(d.train);
    test_ = std::move(d.test);
  } else if (src.kind == DataSource::Kind::kCsv) {
    train_ = ReadDataSetFile(src.path);
  } else {
    if (src.defaulted) Say(std::string(kFashionMnistDir) + " is not installed: synthetic data");
    const bool images = opts_.model != "mlp";
    int64_t dim = images ? opts_.image_size * opts_.image_size : opts_.features;
    train_ = MakeSyntheticDataSet(opts_.samples, dim, opts_.classes, opts_.seed);
    test_ = MakeSyntheticDataSet(std::max<int64_t>(opts_.samples / 4, 1), dim, opts_.classes,
                                 opts_.seed, /*stream=*/1);
  }
  if (!train_.images()) {
    features_ = torch::from_blob(train_.features.data(), {train_.size, train_.feature_dim},
                                 torch::kFloat32);
    labels_ = torch::from_blob(train_.labels.data(), {train_.size}, torch::kInt64);
  }
  if (opts_.augment && !train_.images()) {
    throw UsageError("train: --augment needs image data (--data fashion-mnist or --data-dir)");
  }
  sampler_ =
      std::make_unique<DistributedSampler>(train_.size, ctx_.rank, ctx_.world_size, opts_.seed);
  steps_per_epoch_ = sampler_->samples_per_rank() / (opts_.batch_size * opts_.grad_accum);
  if (steps_per_epoch_ == 0) {
    throw UsageError(
        "train: " + std::to_string(train_.size) + " samples over " +
        std::to_string(ctx_.world_size) + " ranks do not fill one step of --batch-size " +
        std::to_string(opts_.batch_size) + " x --grad-accum " + std::to_string(opts_.grad_accum));
  }
  total_steps_ = opts_.steps > 0 ? opts_.steps : opts_.epochs * steps_per_epoch_;
}

void Trainer::SetupCommunicator() {
  core::CommOptions co;
  co.backend = opts_.backend == "auto" ? (cuda_ ? "nccl" : "gloo") : opts_.backend;
  co.rank = ctx_.rank;
  co.size = ctx_.world_size;
  if (ctx_.store) {
    co.store =
        core::MakePrefixStore("train/" + std::to_string(ctx_.restart_count) + "/comm/", ctx_.store);
  }
  co.timeout = timeout_;
  co.device_index = cuda_ ? device_.index() : -1;
  co.transport = opts_.transport;
  if (!ctx_.rank_dir.empty()) co.flight_dump_path = rundir::RankDir(ctx_.rank_dir).flight();
  co.on_timeout = [this](const core::TimeoutReport& r) {
    try {
      reporter_.Event("timeout", json::parse(r.ToJson()));
    } catch (...) {
    }
  };
  comm_ = core::MakeCommunicator(co);
  StartSeqBeat();
  if (ctx_.set_command_handler && !co.flight_dump_path.empty()) {
    // A weak reference: the launcher may ask for a dump after training ended.
    std::weak_ptr<core::Communicator> weak = comm_;
    ctx_.set_command_handler(
        [weak, path = co.flight_dump_path](core::CommandKind command, const std::string& reason) {
          auto comm = weak.lock();
          if (!comm) return;
          try {
            if (command == core::CommandKind::kDump) comm->flight_recorder().DumpJson(path, reason);
            if (command == core::CommandKind::kAbort) comm->Abort();
          } catch (const std::exception&) {
            // A dump that cannot be written must not take the rank down.
          }
        });
  }
}

void Trainer::Setup() {
  timeout_ = std::chrono::milliseconds(static_cast<int64_t>(opts_.collective_timeout_s * 1000));
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
  LoadData();

  phase_ = core::Phase::kInit;
  {
    std::lock_guard<std::mutex> lock(g_init_mu);
    torch::manual_seed(opts_.seed);
    ModelShape shape{train_.feature_dim, train_.height, train_.width, train_.classes, opts_.hidden};
    // oneDNN serves CPU tensors only; on CUDA nn::Linear is cuBLAS.
    shape.onednn_linear =
        !cuda_ && (opts_.linear_kernel == "onednn" ||
                   (opts_.linear_kernel == "auto" && at::globalContext().hasMKLDNN()));
    model_ = MakeModel(opts_.model, shape);
  }
  model_->to(device_);
  optimizer_ = std::make_unique<torch::optim::SGD>(
      model_->parameters(),
      torch::optim::SGDOptions(opts_.lr).momentum(opts_.momentum).weight_decay(opts_.weight_decay));
  SetupCommunicator();
  if (opts_.amp == "fp16") {
    ddp::GradScalerOptions so;
    so.timeout = timeout_;
    scaler_ = std::make_unique<ddp::GradScaler>(so, device_, comm_);
  }

  if (opts_.preflight && ctx_.world_size > 1) {
    phase_ = core::Phase::kPreflight;
    reporter_.Status([](core::RankStatus& s) { s.phase = core::Phase::kPreflight; });
    QuickPreflightResult pf = RunQuickPreflight(*comm_, 4 << 20, timeout_);
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
  // After a restart or an elastic change of membership (attempt > 0) ranks resume by themselves.
  if (!opts_.checkpoint_dir.empty() &&
      (opts_.resume || ctx_.restart_count > 0 || ctx_.attempt > 0)) {
    phase_ = core::Phase::kCheckpoint;
    if (ctx_.rank == 0) RemoveStaleCheckpointTemps(opts_.checkpoint_dir);
    auto meta = LoadCheckpoint(opts_.checkpoint_dir, Meta(), *model_, *optimizer_);
    if (meta) {
      const ResumePoint at = MapResume(*meta, ctx_.world_size, opts_.batch_size * opts_.grad_accum,
                                       steps_per_epoch_, total_steps_, opts_.steps);
      step_ = at.step;
      total_steps_ = at.total_steps;
      const std::string path = CheckpointPath(opts_.checkpoint_dir);
      Say(at.change.empty() ? "resumed from " + path + " at step " + std::to_string(step_)
                            : at.change + " (" + path + ")");
      reporter_.Event("resumed", {{"step", step_},
                                  {"path", path},
                                  {"from_step", meta->step},
                                  {"from_world_size", meta->world_size},
                                  {"from_global_batch", meta->global_batch},
                                  {"total_steps", total_steps_}});
    } else if (opts_.resume) {
      Say("no checkpoint in " + opts_.checkpoint_dir + ": starting from step 0");
    }
  }
  // Ranks must agree on where they start and end; rank 0's word counts.
  int64_t start[2] = {step_, total_steps_};
  comm_->Broadcast({start, 2, core::DataType::kInt64}, 0)->Wait(timeout_);
  step_ = start[0];
  total_steps_ = start[1];
  last_eval_step_ = step_;

  ddp::DdpOptions dopts;
  dopts.bucket_cap_mb = opts_.bucket_mb;
  dopts.timeout = timeout_;
  ddp_ = std::make_unique<ddp::DistributedDataParallel>(model_->parameters(), comm_, dopts);
  BroadcastBuffers();
  ddp_->TakeStats();  // the broadcasts are set-up, not step traffic
}

torch::Tensor Trainer::Images(const DataSet& d, const uint8_t* rows, int64_t count) {
  torch::Tensor u8 =
      torch::from_blob(const_cast<uint8_t*>(rows), {count, d.feature_dim}, torch::kUInt8);
  // Bytes cross to the device, floats are made there.
  return u8.to(device_).to(torch::kFloat32).sub_(d.mean * 255.0f).div_(d.stddev * 255.0f);
}

torch::Tensor Trainer::TrainBatch(const std::vector<int64_t>& indices, int64_t first,
                                  torch::Tensor* labels) {
  const int64_t b = opts_.batch_size;
  torch::Tensor idx =
      torch::from_blob(const_cast<int64_t*>(indices.data()) + first, {b}, torch::kInt64);
  if (!train_.images()) {
    *labels = labels_.index_select(0, idx).to(device_);
    return features_.index_select(0, idx).to(device_);
  }
  const int64_t dim = train_.feature_dim;
  batch_pixels_.resize(static_cast<size_t>(b * dim));
  std::vector<int64_t> y(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) {
    const int64_t s = indices[first + i];
    std::copy_n(train_.pixels.data() + s * dim, dim, batch_pixels_.data() + i * dim);
    y[i] = train_.labels[s];
  }
  if (opts_.augment) {
    // Seeded by position, so a resumed run augments exactly as the uninterrupted one.
    std::mt19937_64 rng(opts_.seed * 0x9E3779B97F4A7C15ull ^
                        (static_cast<uint64_t>(first) << 20 ^ static_cast<uint64_t>(step_) << 1 ^
                         static_cast<uint64_t>(ctx_.rank) << 48));
    AugmentImages(batch_pixels_.data(), b, train_.height, train_.width, rng);
  }
  *labels = torch::from_blob(y.data(), {b}, torch::kInt64)
                .to(device_, /*non_blocking=*/false,
                    /*copy=*/true);
  return Images(train_, batch_pixels_.data(), b);
}

torch::Tensor Trainer::Logits(const torch::Tensor& x) {
  if (opts_.amp == "off") return model_->forward(x);
  const at::ScalarType dtype = opts_.amp == "fp16" ? at::kHalf : at::kBFloat16;
  if (cuda_) {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(true);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(true);
  }
  torch::Tensor out;
  try {
    out = model_->forward(x);
  } catch (...) {
    at::autocast::set_enabled(false);
    at::autocast::set_cpu_enabled(false);
    throw;
  }
  at::autocast::set_enabled(false);
  at::autocast::set_cpu_enabled(false);
  at::autocast::clear_cache();
  // The loss is taken in float32 outside autocast, as torch.autocast's fp32 list does.
  return out.to(torch::kFloat32);
}

double Trainer::Step(const std::vector<int64_t>& indices, int64_t pos) {
  double loss_sum = 0;
  StartMemoryCheckpoints();
  for (int64_t m = 0; m < opts_.grad_accum; ++m) {
    phase_ = core::Phase::kData;
    torch::Tensor y;
    torch::Tensor x = TrainBatch(indices, (pos * opts_.grad_accum + m) * opts_.batch_size, &y);
    MemoryCheckpoint(MemoryPhase::kData);
    std::optional<ddp::DistributedDataParallel::NoSync> no_sync;
    if (m + 1 < opts_.grad_accum) no_sync.emplace(*ddp_);
    phase_ = core::Phase::kForward;
    torch::Tensor logits = Logits(x);
    torch::Tensor loss = F::cross_entropy(logits, y);
    if (opts_.grad_accum > 1) loss = loss / static_cast<double>(opts_.grad_accum);
    torch::Tensor correct = logits.detach().argmax(1).eq(y).sum();
    window_correct_ = window_correct_.defined() ? window_correct_ + correct : correct;
    window_seen_ += opts_.batch_size;
    MemoryCheckpoint(MemoryPhase::kForward);
    phase_ = core::Phase::kBackward;
    try {
      (scaler_ ? scaler_->Scale(loss) : loss).backward();
    } catch (...) {
      ddp_->RethrowSyncError();
      throw;
    }
    MemoryCheckpoint(MemoryPhase::kBackward);
    loss_sum += loss.item<double>();
  }
  if (!std::isfinite(loss_sum)) {
    // Stop here: training on would only spread the NaN through every rank's weights.
    throw Error(ErrorKind::kInternal,
                std::string("loss became ") + (std::isnan(loss_sum) ? "NaN" : "inf") + " at step " +
                    std::to_string(step_ + 1) + " on rank " + std::to_string(ctx_.rank));
  }
  phase_ = core::Phase::kOptimizer;
  for (auto& group : optimizer_->param_groups()) {
    static_cast<torch::optim::SGDOptions&>(group.options())
        .lr(ScheduledLearningRate(opts_, step_, total_steps_));
  }
  if (scaler_) {
    std::vector<torch::Tensor> grads;
    for (auto& p : model_->parameters()) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
    if (scaler_->Unscale(grads)) optimizer_->step();  // every rank decides alike
    scaler_->Update();
  } else {
    optimizer_->step();
  }
  // Dropped, not zeroed (torch 2.x's zero_grad default): the next backward then hands its
  // gradients to .grad() without a fill and an add, and 0 + g is g, so the arithmetic is the same.
  for (auto& p : model_->parameters()) p.mutable_grad().reset();
  MemoryCheckpoint(MemoryPhase::kOptimizer);
  return loss_sum;
}

void Trainer::Train() {
  std::vector<int64_t> indices;
  int64_t indices_epoch = -1;
  window_start_ = last_beat_ = train_start_ = epoch_start_ = memory_window_start_ = Clock::now();
  const auto interval = std::chrono::duration<double>(opts_.heartbeat_interval_s);
  SayTraining();
  for (; step_ < total_steps_;) {
    if (step_ == opts_.fail_at_step && ctx_.restart_count == 0 && ctx_.attempt == 0) {
      throw Error(ErrorKind::kInternal,
                  "injected failure at step " + std::to_string(step_) + " (--fail-at-step)");
    }
    auto t0 = Clock::now();
    if (ctx_.rank == opts_.slow_rank && opts_.slow_ms > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(opts_.slow_ms));
    }
    int64_t epoch = step_ / steps_per_epoch_;
    if (epoch != indices_epoch) {
      indices = sampler_->Indices(epoch);
      indices_epoch = epoch;
    }
    last_loss_ = Step(indices, step_ % steps_per_epoch_);
    ++step_;
    if (cuda_) {
#ifdef DLAUNCH_TORCH_CUDA
      torch::cuda::synchronize();
#endif
    }
    ddp::DdpStats st = ddp_->TakeStats();
    double ms = Ms(Clock::now() - t0);
    step_ms_.push_back(ms);
    window_steps_++;
    window_step_ms_ += ms;
    window_comm_ms_ += st.comm_wait_ms;
    window_bytes_ += st.bytes_communicated;
    total_step_ms_ += ms;
    total_comm_ms_ += st.comm_wait_ms;
    total_samples_ += opts_.batch_size * opts_.grad_accum;
    memory_window_samples_ += opts_.batch_size * opts_.grad_accum;
    epoch_loss_sum_ += last_loss_;
    epoch_loss_steps_++;
    PostMemoryCheckpoints();

    const bool epoch_end = step_ % steps_per_epoch_ == 0;
    if (test_.size > 0 && (epoch_end || step_ == total_steps_ ||
                           (opts_.eval_every > 0 && step_ % opts_.eval_every == 0))) {
      Evaluate(epoch_end);
    }
    if (ctx_.rank == 0) {
      if (!opts_.checkpoint_dir.empty() &&
          ((opts_.checkpoint_every > 0 && step_ % opts_.checkpoint_every == 0) || epoch_end ||
           step_ == total_steps_)) {
        SaveCheckpointNow(epoch_end ? "epoch" : "step");
      }
      if (g_checkpoint_requested.exchange(false)) SaveCheckpointNow("SIGUSR1");
    }
    if (opts_.heartbeat_interval_s > 0 && Clock::now() - last_beat_ >= interval) Heartbeat(false);
  }
}

void Trainer::AllReduceSum(double* values, size_t count) {
  torch::Tensor t =
      torch::from_blob(values, {static_cast<int64_t>(count)}, torch::kFloat64).to(device_);
  comm_->AllReduce(ddp::TensorBuffer(t), core::ReduceOp::kSum)->Wait(timeout_);
  t = t.cpu();
  std::copy_n(t.data_ptr<double>(), count, values);
}

void Trainer::BroadcastBuffers() {
  // Batch-norm running statistics are not parameters: like PyTorch's DDP (broadcast_buffers),
  // every rank takes rank 0's, so the model evaluated and checkpointed is one model.
  if (ctx_.world_size == 1) return;
  for (auto& b : model_->buffers()) {
    if (b.scalar_type() != torch::kFloat32 || !b.is_contiguous()) continue;
    comm_->Broadcast(ddp::TensorBuffer(b), 0)->Wait(timeout_);
  }
}

void Trainer::Evaluate(bool epoch_end) {
  auto t0 = Clock::now();
  evaluating_ = true;
  phase_ = core::Phase::kForward;
  BroadcastBuffers();
  model_->eval();
  const Shard shard = EvalShard(test_.size, ctx_.rank, ctx_.world_size);
  // correct, summed loss, images, then the train loss since the last evaluation.
  double sums[5] = {0, 0, static_cast<double>(shard.end - shard.begin), epoch_loss_sum_,
                    static_cast<double>(epoch_loss_steps_)};
  {
    // No autograd records and no version counters: evaluation tensors never meet backward.
    c10::InferenceMode inference;
    for (int64_t first = shard.begin; first < shard.end; first += opts_.eval_batch_size) {
      const int64_t n = std::min(opts_.eval_batch_size, shard.end - first);
      torch::Tensor x = test_.images()
                            ? Images(test_, test_.pixels.data() + first * test_.feature_dim, n)
                            : torch::from_blob(test_.features.data() + first * test_.feature_dim,
                                               {n, test_.feature_dim}, torch::kFloat32)
                                  .to(device_);
      torch::Tensor y =
          torch::from_blob(test_.labels.data() + first, {n}, torch::kInt64).to(device_);
      torch::Tensor logits = Logits(x);
      sums[0] += logits.argmax(1).eq(y).sum().item<double>();
      sums[1] += F::cross_entropy(logits, y, F::CrossEntropyFuncOptions().reduction(torch::kSum))
                     .item<double>();
    }
  }
  model_->train();
  AllReduceSum(sums, 5);
  evaluating_ = false;
  const double accuracy = sums[0] / std::max(sums[2], 1.0);
  const double test_loss = sums[1] / std::max(sums[2], 1.0);
  const double train_loss = sums[3] / std::max(sums[4], 1.0);
  const double seconds = std::chrono::duration<double>(Clock::now() - epoch_start_).count();
  const int64_t epochs = (total_steps_ + steps_per_epoch_ - 1) / steps_per_epoch_;
  const int64_t epoch = (step_ + steps_per_epoch_ - 1) / steps_per_epoch_;
  if (ctx_.rank == 0) {
    json body = {{"event", "eval"},
                 {"epoch", epoch},
                 {"test_accuracy", accuracy},
                 {"test_loss", test_loss},
                 {"step", step_},
                 {"train_loss", train_loss},
                 {"images", static_cast<int64_t>(sums[2])},
                 {"eval_ms", Ms(Clock::now() - t0)}};
    reporter_.Post([this, body] { reporter_.Event("eval", body); });
    std::string head = epoch_end
                           ? "epoch " + std::to_string(epoch) + "/" + std::to_string(epochs)
                           : "step " + std::to_string(step_) + "/" + std::to_string(total_steps_);
    Say(head + ": train loss " + Fixed(train_loss, 4) + ", test loss " + Fixed(test_loss, 4) +
        ", test accuracy " + Fixed(100 * accuracy, 2) + "% (" +
        std::to_string(static_cast<int64_t>(sums[2])) + " images), " + Fixed(seconds, 1) + " s");
  }
  last_eval_step_ = step_;
  if (epoch_end) {
    epoch_loss_sum_ = 0;
    epoch_loss_steps_ = 0;
    epoch_start_ = Clock::now();
  }
}

std::string Trainer::CheckpointDir() const {
  if (!opts_.checkpoint_dir.empty()) return opts_.checkpoint_dir;
  return ctx_.run_dir.empty() ? std::string() : ctx_.run_dir + "/checkpoint";
}

void Trainer::SaveCheckpointNow(const std::string& reason) {
  const std::string dir = CheckpointDir();
  if (dir.empty()) {
    std::cerr << "rank 0: " << reason << ": no --checkpoint-dir and no run directory: no checkpoint"
              << std::endl;
    return;
  }
  core::Phase before = phase_;
  phase_ = core::Phase::kCheckpoint;
  try {
    SaveCheckpoint(dir, Meta(), *model_, *optimizer_);
    reporter_.Event("checkpoint",
                    {{"step", step_}, {"path", CheckpointPath(dir)}, {"reason", reason}});
    if (reason == "SIGUSR1") {
      Say("SIGUSR1: checkpoint at step " + std::to_string(step_) + " written to " +
          CheckpointPath(dir) + "; training goes on");
    }
  } catch (const dlaunch::Error& e) {
    // Training goes on: the previous checkpoint is intact, and losing the run over a full disk
    // would cost more than a stale checkpoint.
    std::cerr << "rank " << ctx_.rank << ": " << e.what() << std::endl;
    reporter_.Event("error", {{"message", e.what()}, {"step", step_}});
  }
  phase_ = before;
}

int Trainer::Run() {
  int code = RunOnce();
  StopSeqBeat();
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
    const std::string what = e.what();
    if (what.rfind("loss became ", 0) == 0) return ReportFailure("nan", what, kExitRankFailed);
    return ReportFailure("error", what, kExitRankFailed);
  } catch (const std::exception& e) {
    if (LooksLikeAllocationFailure(e.what())) return ReportOom(e.what());
    return ReportFailure("error", e.what(), 1);
  }
}

namespace {

// Every step frees and reallocates the same few MiB of activations and gradients. glibc's default
// gives freed memory back to the kernel (munmap, or trimming the heap top past a threshold that
// adapts to the largest block seen), so each step page-faults its buffers in again and the kernel
// zeroes them: about 15% of a rank's CPU time with 4 ranks on 2 cores. Blocks up to 32 MiB now
// come from the heap, and up to 64 MiB of free heap top is kept; larger blocks, and a free heap
// top beyond that, still go back to the kernel.
void KeepStepMemory() {
#ifdef __GLIBC__
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

void OnSigusr1(int) { g_checkpoint_requested.store(true); }

// SIGUSR1 means "checkpoint now, go on" (Slurm's --signal=USR1@T), SIGUSR2 nothing: neither may
// end a training rank.
void InstallSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnSigusr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &sa, nullptr);
  ::signal(SIGUSR2, SIG_IGN);
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
  InstallSignalHandlers();
  KeepStepMemory();
  Trainer trainer(ctx, std::move(opts));
  return trainer.Run();
}

}  // namespace dlaunch::worker
