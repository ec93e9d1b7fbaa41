// Command-line options of `dlaunch-worker train` (torch-free, so the launcher can check them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlaunch::worker {

struct TrainOptions {
  std::string model = "mlp";  // mlp | cnn
  int64_t steps = 200;        // optimizer steps; 0 means "use --epochs"
  int64_t epochs = 0;         // when set, steps = epochs * steps_per_epoch
  int64_t batch_size = 32;    // per rank, per micro-batch
  double lr = 0.05;
  double momentum = 0.9;
  uint64_t seed = 42;
  int64_t grad_accum = 1;  // micro-batches per optimizer step
  bool amp = false;
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;  // steps; 0 = only at the end when checkpoint_dir is set
  bool resume = false;
  std::string data_file;   // empty = synthetic data set
  int64_t samples = 8192;  // synthetic data set size
  int64_t features = 64;   // synthetic features (mlp); cnn uses 1 x image_size^2
  int64_t classes = 10;
  int64_t hidden = 256;     // mlp hidden width
  int64_t image_size = 16;  // cnn input side
  double bucket_mb = 25.0;
  double heartbeat_interval_s = 1.0;  // 0 disables telemetry
  bool preflight = true;
  std::string backend = "auto";  // auto = nccl with --device cuda, else gloo
  std::string device = "cpu";    // cpu | cuda
  // gloo: auto | shm | tcp (core::CommOptions::transport)
  std::string transport = "auto";
  double collective_timeout_s = 300;
  int64_t fail_at_step = -1;  // test hook: exit 1 at this step on the first attempt
  bool quiet = false;         // no console progress line (benchmarks, tests)
  bool help = false;
};

// Throws UsageError on unknown flags, bad values or inconsistent combinations. Does not block.
TrainOptions ParseTrainOptions(const std::vector<std::string>& args);

// Parses the train arguments without running anything; throws UsageError naming the bad flag.
// Does not block. The launcher calls it before spawning ranks, so bad flags exit 2 at once.
void ValidateTrainArgs(const std::vector<std::string>& args);

// The option help text, for `dlaunch train --help`.
std::string TrainOptionsHelp();

}  // namespace dlaunch::worker
