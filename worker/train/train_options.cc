#include "worker/train/train_options.h"

#include <sys/stat.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "worker/train/checkpoint_file.h"
#include "worker/train/data_set.h"
#include "worker/train/idx_file.h"

namespace dlaunch::worker {
namespace po = boost::program_options;

namespace {

po::options_description Describe(TrainOptions& o) {
  po::options_description d("train options");
  auto add = d.add_options();
  add("help,h", po::bool_switch(&o.help), "print this help");
  add("model", po::value(&o.model)->default_value(o.model),
      "cnn (two conv + batch-norm + pooling blocks, a classifier) | mlp | resnet (a small ResNet, "
      "for GPUs)");
  add("data", po::value(&o.data),
      "fashion-mnist (default when /usr/share/datasets/fashion-mnist is installed) | synthetic | "
      "FILE.csv (features..., label per line)");
  add("data-dir", po::value(&o.data_dir),
      "a directory of IDX files (train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], "
      "t10k-...): MNIST, Fashion-MNIST");
  add("augment", po::bool_switch(&o.augment),
      "image data: random shift by up to 2 pixels and horizontal flip");
  add("epochs", po::value(&o.epochs)->default_value(o.epochs), "passes over the training data");
  add("steps", po::value(&o.steps)->default_value(o.steps),
      "optimizer steps; when > 0 they replace --epochs");
  add("eval-every", po::value(&o.eval_every)->default_value(o.eval_every),
      "steps between test-set evaluations, besides the one after every epoch (0: epochs only)");
  add("eval-batch-size", po::value(&o.eval_batch_size)->default_value(o.eval_batch_size),
      "test images per forward pass");
  add("batch-size", po::value(&o.batch_size)->default_value(o.batch_size),
      "samples per rank per micro-batch");
  add("lr", po::value(&o.lr)->default_value(o.lr), "peak SGD learning rate");
  add("momentum", po::value(&o.momentum)->default_value(o.momentum), "SGD momentum");
  add("weight-decay", po::value(&o.weight_decay)->default_value(o.weight_decay),
      "SGD weight decay");
  add("lr-schedule", po::value(&o.lr_schedule)->default_value(o.lr_schedule),
      "cosine (decay to 0 over the run) | step (x --lr-gamma every --lr-step-size steps) | none");
  add("warmup-steps", po::value(&o.warmup_steps)->default_value(o.warmup_steps),
      "steps of linear learning-rate warm-up");
  add("lr-step-size", po::value(&o.lr_step_size)->default_value(o.lr_step_size),
      "step schedule: steps between decays (0: a third of the run)");
  add("lr-gamma", po::value(&o.lr_gamma)->default_value(o.lr_gamma), "step schedule: factor");
  add("seed", po::value(&o.seed)->default_value(o.seed),
      "seed of the model init, the synthetic data, the sampler and augmentation");
  add("grad-accum", po::value(&o.grad_accum)->default_value(o.grad_accum),
      "micro-batches per optimizer step; gradients are all-reduced only on the last one");
  add("amp", po::value(&o.amp)->default_value(o.amp)->implicit_value("bf16"),
      "mixed precision: bf16 autocast (CPU and CUDA; --amp alone) | fp16 autocast with a "
      "gradient scaler (CUDA) | off");
  add("linear-kernel", po::value(&o.linear_kernel)->default_value(o.linear_kernel),
      "fully connected layers on the CPU: auto (onednn when libtorch has oneDNN) | onednn (as 1 x "
      "1 convolutions: oneDNN's kernels) | blas (the BLAS libtorch links; Debian's reference one "
      "is 4-5x slower here)");
  add("checkpoint-dir", po::value(&o.checkpoint_dir),
      "where rank 0 writes checkpoints (after every epoch, every --checkpoint-every steps, on "
      "SIGUSR1)");
  add("checkpoint-every", po::value(&o.checkpoint_every)->default_value(o.checkpoint_every),
      "steps between checkpoints (0: after every epoch and at the end only)");
  add("resume", po::bool_switch(&o.resume),
      "resume from --checkpoint-dir (automatic after a restart when a checkpoint exists)");
  add("samples", po::value(&o.samples)->default_value(o.samples), "synthetic data set size");
  add("features", po::value(&o.features)->default_value(o.features),
      "synthetic feature count (mlp)");
  add("classes", po::value(&o.classes)->default_value(o.classes), "synthetic class count");
  add("hidden", po::value(&o.hidden)->default_value(o.hidden), "mlp hidden width");
  add("image-size", po::value(&o.image_size)->default_value(o.image_size),
      "synthetic image side for cnn / resnet (1 x S x S)");
  add("memory-every", po::value(&o.memory_every)->default_value(o.memory_every),
      "memory checkpoints (after data, forward, backward, optimizer) on each of the first 10 "
      "steps, then every N steps (0: off)");
  add("bucket-mb", po::value(&o.bucket_mb)->default_value(o.bucket_mb),
      "gradient bucket size in MiB");
  add("heartbeat-interval",
      po::value(&o.heartbeat_interval_s)->default_value(o.heartbeat_interval_s),
      "seconds between telemetry events and progress lines (0: only the closing event)");
  add("no-preflight", "skip the quick pre-flight check");
  add("backend", po::value(&o.backend)->default_value(o.backend),
      "auto | gloo | nccl (auto: nccl with --device cuda, else gloo)");
  add("device", po::value(&o.device)->default_value(o.device), "cpu | cuda");
  add("transport", po::value(&o.transport)->default_value(o.transport),
      "gloo: auto | shm | tcp (auto: shared memory between ranks of one host)");
  add("timeout", po::value(&o.collective_timeout_s)->default_value(o.collective_timeout_s),
      "seconds a collective may take before the rank reports a hang and exits 3");
  add("quiet", po::bool_switch(&o.quiet), "no console progress");
  add("fail-at-step", po::value(&o.fail_at_step)->default_value(o.fail_at_step),
      "testing: exit 1 at this step on the first attempt (restart count 0)");
  add("slow-rank", po::value(&o.slow_rank)->default_value(o.slow_rank),
      "testing: this rank sleeps --slow-ms in every step, a straggler (-1: none)");
  add("slow-ms", po::value(&o.slow_ms)->default_value(o.slow_ms),
      "testing: milliseconds --slow-rank sleeps per step");
  return d;
}

void Require(bool ok, const std::string& message) {
  if (!ok) throw UsageError("train: " + message);
}

bool IsDir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// `--amp fp16` as well as `--amp=fp16`: an implicit value never takes the next word by itself.
std::vector<std::string> JoinAmpValue(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--amp" && i + 1 < args.size() &&
        (args[i + 1] == "bf16" || args[i + 1] == "fp16" || args[i + 1] == "off")) {
      out.push_back("--amp=" + args[++i]);
    } else {
      out.push_back(args[i]);
    }
  }
  return out;
}

}  // namespace

TrainOptions ParseTrainOptions(const std::vector<std::string>& args) {
  TrainOptions o;
  po::options_description d = Describe(o);
  po::variables_map vm;
  try {
    po::positional_options_description none;  // any stray word is an error
    po::store(po::command_line_parser(JoinAmpValue(args)).options(d).positional(none).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("train: ") + e.what());
  }
  o.preflight = vm.count("no-preflight") == 0;
  if (o.help) return o;
  Require(o.model == "mlp" || o.model == "cnn" || o.model == "resnet",
          "--model must be cnn, mlp or resnet, got '" + o.model + "'");
  Require(o.steps >= 0 && o.epochs >= 0, "--steps and --epochs must be >= 0");
  Require(o.steps > 0 || o.epochs > 0, "--steps or --epochs must be > 0");
  Require(o.eval_every >= 0, "--eval-every must be >= 0");
  Require(o.eval_batch_size > 0, "--eval-batch-size must be > 0");
  Require(o.batch_size > 0, "--batch-size must be > 0");
  Require(std::isfinite(o.lr) && o.lr > 0, "--lr must be a finite number > 0");
  Require(std::isfinite(o.momentum) && o.momentum >= 0 && o.momentum < 1,
          "--momentum must be in [0, 1)");
  Require(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "--weight-decay must be >= 0");
  Require(o.lr_schedule == "cosine" || o.lr_schedule == "step" || o.lr_schedule == "none",
          "--lr-schedule must be cosine, step or none, got '" + o.lr_schedule + "'");
  Require(o.warmup_steps >= 0, "--warmup-steps must be >= 0");
  Require(o.lr_step_size >= 0, "--lr-step-size must be >= 0");
  Require(std::isfinite(o.lr_gamma) && o.lr_gamma > 0 && o.lr_gamma <= 1,
          "--lr-gamma must be in (0, 1]");
  Require(o.grad_accum > 0, "--grad-accum must be > 0");
  Require(o.amp == "off" || o.amp == "bf16" || o.amp == "fp16",
          "--amp must be bf16, fp16 or off, got '" + o.amp + "'");
  Require(o.amp != "fp16" || o.device == "cuda",
          "--amp fp16 needs --device cuda (its gradient scaler is for CUDA; on the CPU use --amp "
          "bf16)");
  Require(o.linear_kernel == "auto" || o.linear_kernel == "onednn" || o.linear_kernel == "blas",
          "--linear-kernel must be auto, onednn or blas, got '" + o.linear_kernel + "'");
  Require(o.checkpoint_every >= 0, "--checkpoint-every must be >= 0");
  Require(o.checkpoint_every == 0 || !o.checkpoint_dir.empty(),
          "--checkpoint-every needs --checkpoint-dir");
  Require(!o.resume || !o.checkpoint_dir.empty(), "--resume needs --checkpoint-dir");
  Require(o.samples > 0, "--samples must be > 0");
  Require(o.features > 0 && o.classes > 1 && o.hidden > 0,
          "--features, --hidden must be > 0 and --classes > 1");
  Require(o.image_size >= 8 && o.image_size <= 1024, "--image-size must be in [8, 1024]");
  Require(o.memory_every >= 0, "--memory-every must be >= 0");
  Require(std::isfinite(o.bucket_mb) && o.bucket_mb > 0, "--bucket-mb must be > 0");
  Require(std::isfinite(o.heartbeat_interval_s) &&
              (o.heartbeat_interval_s == 0 || o.heartbeat_interval_s >= 0.001),
          "--heartbeat-interval must be 0 (only the closing event) or at least 0.001 seconds");
  Require(o.fail_at_step >= -1, "--fail-at-step must be a step >= 0, or -1 for never");
  Require(o.slow_rank >= -1, "--slow-rank must be a rank >= 0, or -1 for none");
  Require(std::isfinite(o.slow_ms) && o.slow_ms >= 0 && o.slow_ms <= 60000,
          "--slow-ms must be in [0, 60000]");
  Require(o.backend == "auto" || o.backend == "gloo" || o.backend == "nccl",
          "--backend must be auto, gloo or nccl");
  Require(o.device == "cpu" || o.device == "cuda", "--device must be cpu or cuda");
  Require(o.transport == "auto" || o.transport == "shm" || o.transport == "tcp",
          "--transport must be auto, shm or tcp");
  Require(o.backend != "nccl" || o.device == "cuda", "--backend nccl needs --device cuda");
  Require(o.transport != "shm" || o.backend == "gloo" || (o.backend == "auto" && o.device == "cpu"),
          "--transport shm is the gloo backend's, and this run trains on nccl (--device cuda): "
          "drop --transport, or give --backend gloo");
  Require(std::isfinite(o.collective_timeout_s) && o.collective_timeout_s > 0 &&
              o.collective_timeout_s <= 7 * 24 * 3600,
          "--timeout must be > 0 and at most a week");
  Require(o.data.empty() || o.data_dir.empty() || o.data == "fashion-mnist",
          "--data-dir names IDX files; it cannot be combined with --data " + o.data);
  return o;
}

DataSource ResolveDataSource(const TrainOptions& o) {
  DataSource s;
  if (!o.data_dir.empty()) {
    s.kind = DataSource::Kind::kIdx;
    s.path = o.data_dir;
  } else if (o.data == "fashion-mnist") {
    if (!IsDir(kFashionMnistDir)) {
      throw UsageError(std::string("train: --data fashion-mnist: ") + kFashionMnistDir +
                       " is missing (apt-get install dataset-fashion-mnist, or --data-dir DIR)");
    }
    s.kind = DataSource::Kind::kIdx;
    s.path = kFashionMnistDir;
  } else if (o.data == "synthetic") {
    s.kind = DataSource::Kind::kSynthetic;
  } else if (!o.data.empty()) {
    s.kind = DataSource::Kind::kCsv;
    s.path = o.data;
  } else {
    s.defaulted = true;
    bool images = IsDir(kFashionMnistDir);
    s.kind = images ? DataSource::Kind::kIdx : DataSource::Kind::kSynthetic;
    if (images) s.path = kFashionMnistDir;
  }
  return s;
}

TrainOptions ValidateTrainArgs(const std::vector<std::string>& args, int world_size,
                               int fewest_ranks) {
  TrainOptions o = ParseTrainOptions(args);
  if (o.help) return o;
  DataSource s = ResolveDataSource(o);
  // What the model's shapes follow from, as far as known without reading all the data.
  ShapeKey key{o.model, 0, 0, o.model == "mlp" ? o.hidden : int64_t{0}};
  int64_t samples = o.samples;
  int64_t side = o.image_size;  // of square images; 0: the data are not square images
  if (s.kind == DataSource::Kind::kIdx) {
    const IdxHeader h = ReadIdxHeader(CheckIdxDataDir(s.path).train_images, 3);
    key.feature_dim = h.dims[1] * h.dims[2];
    samples = h.dims[0];
    side = std::min(h.dims[1], h.dims[2]);
  } else if (s.kind == DataSource::Kind::kCsv) {
    const DataSet d = ReadDataSetFile(s.path);
    key.feature_dim = d.feature_dim;
    key.classes = d.classes;
    samples = d.size;
    side = std::llround(std::sqrt(static_cast<double>(d.feature_dim)));
    if (side * side != d.feature_dim) side = 0;
  } else {
    key.feature_dim = o.model == "mlp" ? o.features : o.image_size * o.image_size;
    key.classes = o.classes;
  }
  // What the trainer would find only after every rank loaded the data.
  Require(!o.augment || s.kind == DataSource::Kind::kIdx,
          "--augment needs image data (--data fashion-mnist or --data-dir)");
  Require(o.model == "mlp" || side >= 8,
          "--model " + o.model + " needs square images of at least 8 x 8 pixels, and " + s.path +
              " has " + std::to_string(key.feature_dim) + " features (use --model mlp)");
  const int ranks = world_size > 0 ? world_size : fewest_ranks;
  if (ranks > 0) {
    const int64_t per_rank = (samples + ranks - 1) / ranks;  // DistributedSampler's share
    Require(per_rank >= o.batch_size * o.grad_accum,
            std::to_string(samples) + " samples over " + std::to_string(ranks) +
                " ranks do not fill one step of --batch-size " + std::to_string(o.batch_size) +
                " x --grad-accum " + std::to_string(o.grad_accum) + " (at most " +
                std::to_string(per_rank / o.grad_accum) + " per rank)");
  }
  struct stat st {};
  const std::string path = CheckpointPath(o.checkpoint_dir);
  if (o.resume && ::lstat(path.c_str(), &st) == 0) {
    CheckpointBytes file;
    try {
      file = ReadCheckpointFile(path);
    } catch (const UsageError& e) {
      throw UsageError(std::string("train: --resume: ") + e.what());
    }
    const int64_t per_rank = o.batch_size * o.grad_accum;
    if (file.manifest) {
      const std::string why =
          CheckpointMismatch(*file.manifest, key, per_rank, per_rank * world_size);
      if (!why.empty()) throw UsageError("train: --resume: checkpoint " + path + ": " + why);
    }
  }
  return o;
}

double ScheduledLearningRate(const TrainOptions& o, int64_t step, int64_t total_steps) {
  if (step < o.warmup_steps) {
    return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  }
  if (o.lr_schedule == "cosine") {
    int64_t span = std::max<int64_t>(total_steps - o.warmup_steps, 1);
    double t = std::min(1.0, static_cast<double>(step - o.warmup_steps) / span);
    return o.lr * 0.5 * (1.0 + std::cos(M_PI * t));
  }
  if (o.lr_schedule == "step") {
    int64_t size = o.lr_step_size > 0 ? o.lr_step_size : std::max<int64_t>(total_steps / 3, 1);
    return o.lr * std::pow(o.lr_gamma, static_cast<double>(step / size));
  }
  return o.lr;
}

std::string TrainOptionsHelp() {
  TrainOptions o;
  std::ostringstream out;
  out << "usage: dlaunch --nproc N train [options]\n" << Describe(o);
  return out.str();
}

}  // namespace dlaunch::worker
