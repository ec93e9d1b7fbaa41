// The rank-side driver of `dlaunch train` (internal to the trainer): trainer.cc holds set-up,
// the training step, evaluation and checkpoints; trainer_telemetry.cc the memory checkpoints,
// heartbeats, the closing table and the failure reports.
#pragma once

#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/sgd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/comm/communicator.h"
#include "ddp/ddp.h"
#include "ddp/grad_scaler.h"
#include "worker/train/checkpoint.h"
#include "worker/train/data_set.h"
#include "worker/train/distributed_sampler.h"
#include "worker/train/memory_probe.h"
#include "worker/train/train.h"
#include "worker/train/train_options.h"
#include "worker/train/train_reporter.h"

namespace dlaunch::worker {

// Set by SIGUSR1 (any rank); rank 0 writes a checkpoint after the step in progress and goes on.
extern std::atomic<bool> g_checkpoint_requested;

// The phases a memory checkpoint is taken after, in step order.
enum class MemoryPhase { kData, kForward, kBackward, kOptimizer, kCount };
const char* MemoryPhaseName(MemoryPhase phase);

class Trainer {
 public:
  using Clock = std::chrono::steady_clock;

  Trainer(const TrainContext& ctx, TrainOptions opts);
  // Blocks for the whole run; returns the rank's exit code.
  int Run();

 private:
  // trainer.cc
  int RunOnce();
  void Setup();
  void LoadData();
  void SetupCommunicator();
  void Train();
  double Step(const std::vector<int64_t>& indices, int64_t pos);
  torch::Tensor Logits(const torch::Tensor& x);
  torch::Tensor TrainBatch(const std::vector<int64_t>& indices, int64_t first,
                           torch::Tensor* labels);
  torch::Tensor Images(const DataSet& d, const uint8_t* rows, int64_t count);
  void Evaluate(bool epoch_end);
  void AllReduceSum(double* values, size_t count);
  void BroadcastBuffers();
  std::string CheckpointDir() const;
  void SaveCheckpointNow(const std::string& reason);
  CheckpointManifest Meta() const;
  void Say(const std::string& line);

  // trainer_telemetry.cc
  void SayTraining();             // what is trained on what, with how many threads, ranks and steps
  void StartMemoryCheckpoints();  // decides whether this step is sampled
  void MemoryCheckpoint(MemoryPhase phase);
  std::string PhaseLabel() const;  // "forward", "eval forward", ...
  void PostMemoryCheckpoints();
  void Heartbeat(bool final_beat);
  // The collective seqs beat on their own thread, so that a rank blocked inside a collective
  // still says which one (the hang monitor compares them). Start: after SetupCommunicator; Stop
  // blocks for at most one beat.
  void StartSeqBeat();
  void StopSeqBeat();
  void Finish();
  int ReportOom(const std::string& what);
  int ReportFailure(const std::string& kind, const std::string& message, int exit_code);

  const TrainContext& ctx_;
  TrainOptions opts_;
  TrainReporter reporter_;
  std::shared_ptr<core::Communicator> comm_;
  std::chrono::milliseconds timeout_{0};
  torch::Device device_{torch::kCPU};
  bool cuda_ = false;
  DataSet train_, test_;
  torch::Tensor features_, labels_;    // float data sets (synthetic, CSV)
  std::vector<uint8_t> batch_pixels_;  // image batches are gathered (and augmented) here
  torch::nn::Sequential model_{nullptr};
  std::unique_ptr<torch::optim::SGD> optimizer_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
  std::unique_ptr<DistributedSampler> sampler_;
  std::unique_ptr<ddp::GradScaler> scaler_;  // --amp fp16
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
  int64_t step_ = 0;  // optimizer steps completed
  core::Phase phase_ = core::Phase::kInit;
  bool evaluating_ = false;
  double last_loss_ = 0;
  double epoch_loss_sum_ = 0;
  int64_t epoch_loss_steps_ = 0;
  Clock::time_point epoch_start_;
  int64_t last_eval_step_ = -1;

  // Memory checkpoints of the step in progress (when sampled) and their cost.
  bool memory_sampled_ = false;  // this step takes memory checkpoints
  std::array<rundir::MemoryFigures, static_cast<size_t>(MemoryPhase::kCount)> memory_{};
  MemoryPhase last_memory_phase_ = MemoryPhase::kData;
  rundir::MemoryFigures last_memory_;
  int64_t memory_window_samples_ = 0;
  Clock::time_point memory_window_start_;
  double memory_ms_ = 0;

  // Window since the last heartbeat, and totals for the end-of-run table.
  Clock::time_point window_start_;
  Clock::time_point last_beat_;
  int64_t window_steps_ = 0;
  double window_step_ms_ = 0, window_comm_ms_ = 0;
  int64_t window_bytes_ = 0;
  torch::Tensor window_correct_;  // training predictions right in the window (no sync per step)
  int64_t window_seen_ = 0;
  double total_step_ms_ = 0, total_comm_ms_ = 0;
  int64_t total_samples_ = 0;
  std::vector<double> step_ms_;
  std::mutex console_mu_;  // rank 0's console: Say() and the reporter thread's progress line
  bool live_line_ = false;
  bool preflight_failed_ = false;
  Clock::time_point train_start_;
  double telemetry_ms_ = 0;  // time spent in Heartbeat()

  std::mutex seq_beat_mu_;
  std::condition_variable seq_beat_cv_;
  bool seq_beat_stop_ = false;
  std::thread seq_beat_;
};

double Ms(Trainer::Clock::duration d);

}  // namespace dlaunch::worker
