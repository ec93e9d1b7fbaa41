// Command-line options of `dlaunch-worker train` and what follows from them without torch: where
// the data comes from, the learning-rate schedule. The launcher links this (not the trainer) to
// reject bad flags and data files before any rank starts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlaunch::worker {

// Where Debian's dataset-fashion-mnist package puts the IDX files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct TrainOptions {
  std::string model = "cnn";  // cnn | mlp | resnet
  // "" (default): fashion-mnist when installed, else synthetic; or fashion-mnist | synthetic |
  // a CSV file.
  std::string data;
  std::string data_dir;  // IDX files (train-/t10k-images/labels) elsewhere; implies IDX data
  bool augment = false;  // random shift by up to 2 pixels and horizontal flip (image data)
  int64_t steps = 0;     // optimizer steps; 0 = --epochs passes over the data
  int64_t epochs = 1;
  int64_t eval_every = 0;         // steps between evaluations, besides the one after every epoch
  int64_t eval_batch_size = 128;  // activations stay in cache and under the mmap threshold
  int64_t batch_size = 32;        // per rank, per micro-batch
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 0.0005;
  std::string lr_schedule = "cosine";  // cosine | step | none
  int64_t warmup_steps = 100;
  int64_t lr_step_size = 0;  // step schedule: steps between decays; 0 = a third of the run
  double lr_gamma = 0.1;
  uint64_t seed = 42;
  int64_t grad_accum = 1;   // micro-batches per optimizer step
  std::string amp = "off";  // off | bf16 | fp16 (--amp alone: bf16)
  // Fully connected layers: auto (onednn on the CPU when libtorch has oneDNN, else blas) | onednn
  // (as 1 x 1 convolutions) | blas (torch::nn::Linear: the linked BLAS, cuBLAS on CUDA).
  std::string linear_kernel = "auto";
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;  // steps; checkpoints are also written after every epoch
  bool resume = false;
  int64_t samples = 8192;  // synthetic data set size
  int64_t features = 64;   // synthetic features (mlp); image models use 1 x image_size^2
  int64_t classes = 10;
  int64_t hidden = 256;       // mlp hidden width
  int64_t image_size = 16;    // synthetic image side
  int64_t memory_every = 50;  // memory checkpoints: each of the first steps, then every N; 0 off
  double bucket_mb = 25.0;
  double heartbeat_interval_s = 1.0;  // 0 disables telemetry
  bool preflight = true;
  std::string backend = "auto";  // auto = nccl with --device cuda, else gloo
  std::string device = "cpu";    // cpu | cuda
  // gloo: auto | shm | tcp (core::CommOptions::transport)
  std::string transport = "auto";
  double collective_timeout_s = 300;
  int64_t fail_at_step = -1;  // test hook: exit 1 at this step on the first attempt
  int slow_rank = -1;         // test hook: this rank sleeps slow_ms in every step (a straggler)
  double slow_ms = 0;
  bool quiet = false;  // no console progress line (benchmarks, tests)
  bool help = false;
};

// Throws UsageError on unknown flags, bad values or inconsistent combinations. Does not block.
TrainOptions ParseTrainOptions(const std::vector<std::string>& args);

// What --data and --data-dir resolve to.
struct DataSource {
  enum class Kind { kIdx, kSynthetic, kCsv } kind = Kind::kSynthetic;
  std::string path;        // the IDX directory or the CSV file
  bool defaulted = false;  // no --data given: fashion-mnist when installed, else synthetic
};
DataSource ResolveDataSource(const TrainOptions& o);

// Parses the options and checks the data files they name (IDX headers and sizes, the whole CSV
// file); throws UsageError naming the bad flag or file. The launcher calls it before spawning
// ranks, so bad input exits 2 at once. Returns the options (with --help, unchecked beyond that).
// Blocks for short file reads.
// With --resume, the checkpoint is checked too (checkpoint_file.h: format, CRC-32, model and
// shapes, batch) against `world_size` ranks (0: not known before an elastic rendezvous).
// The data must fill one step of every rank of `world_size`, or of `fewest_ranks` (an elastic
// job's least: the most samples per rank) when the world is not known; 0 and 0: not checked.
TrainOptions ValidateTrainArgs(const std::vector<std::string>& args, int world_size = 0,
                               int fewest_ranks = 0);

// The learning rate of optimizer step `step` (0-based) of `total_steps`: linear warm-up over
// --warmup-steps, then cosine decay to 0, a step decay by --lr-gamma every --lr-step-size steps,
// or constant. Does not block.
double ScheduledLearningRate(const TrainOptions& o, int64_t step, int64_t total_steps);

// The option help text, for `dlaunch train --help`.
std::string TrainOptionsHelp();

}  // namespace dlaunch::worker
