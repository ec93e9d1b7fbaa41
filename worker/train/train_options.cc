#include "worker/train/train_options.h"

#include <boost/program_options.hpp>
#include <sstream>

#include "core/error.h"

namespace dlaunch::worker {
namespace po = boost::program_options;

namespace {

po::options_description Describe(TrainOptions& o) {
  po::options_description d("train options");
  d.add_options()                                                          //
      ("help,h", po::bool_switch(&o.help), "print this help")              //
      ("model", po::value(&o.model)->default_value(o.model), "mlp | cnn")  //
      ("steps", po::value(&o.steps)->default_value(o.steps),
       "optimizer steps (ignored when --epochs is given)")  //
      ("epochs", po::value(&o.epochs)->default_value(o.epochs),
       "passes over the data set; overrides --steps when > 0")  //
      ("batch-size", po::value(&o.batch_size)->default_value(o.batch_size),
       "samples per rank per micro-batch")                                             //
      ("lr", po::value(&o.lr)->default_value(o.lr), "SGD learning rate")               //
      ("momentum", po::value(&o.momentum)->default_value(o.momentum), "SGD momentum")  //
      ("seed", po::value(&o.seed)->default_value(o.seed),
       "seed of the model init, the synthetic data and the sampler")  //
      ("grad-accum", po::value(&o.grad_accum)->default_value(o.grad_accum),
       "micro-batches per optimizer step; gradients are all-reduced only on the last one")  //
      ("amp", po::bool_switch(&o.amp), "bf16 autocast on CUDA (ignored on CPU)")            //
      ("checkpoint-dir", po::value(&o.checkpoint_dir), "where rank 0 writes checkpoints")   //
      ("checkpoint-every", po::value(&o.checkpoint_every)->default_value(o.checkpoint_every),
       "steps between checkpoints (0: only at the end)")  //
      ("resume", po::bool_switch(&o.resume),
       "resume from --checkpoint-dir (automatic after a restart when a checkpoint exists)")  //
      ("data", po::value(&o.data_file),
       "data set file (CSV: features..., label per line); default: synthetic")                 //
      ("samples", po::value(&o.samples)->default_value(o.samples), "synthetic data set size")  //
      ("features", po::value(&o.features)->default_value(o.features),
       "synthetic feature count (mlp)")                                                      //
      ("classes", po::value(&o.classes)->default_value(o.classes), "synthetic class count")  //
      ("hidden", po::value(&o.hidden)->default_value(o.hidden), "mlp hidden width")          //
      ("image-size", po::value(&o.image_size)->default_value(o.image_size),
       "cnn input side (synthetic images are 1 x S x S)")  //
      ("bucket-mb", po::value(&o.bucket_mb)->default_value(o.bucket_mb),
       "gradient bucket size in MiB")  //
      ("heartbeat-interval",
       po::value(&o.heartbeat_interval_s)->default_value(o.heartbeat_interval_s),
       "seconds between telemetry events and progress lines (0: only the closing event)")  //
      ("no-preflight", "skip the quick pre-flight check")                                  //
      ("backend", po::value(&o.backend)->default_value(o.backend),
       "auto | gloo | nccl (auto: nccl with --device cuda, else gloo)")        //
      ("device", po::value(&o.device)->default_value(o.device), "cpu | cuda")  //
      ("transport", po::value(&o.transport)->default_value(o.transport),
       "gloo: auto | shm | tcp (auto: shared memory between ranks of one host)")  //
      ("timeout", po::value(&o.collective_timeout_s)->default_value(o.collective_timeout_s),
       "seconds a collective may take before the rank reports a hang and exits 3")  //
      ("quiet", po::bool_switch(&o.quiet), "no console progress")                   //
      ("fail-at-step", po::value(&o.fail_at_step)->default_value(o.fail_at_step),
       "testing: exit 1 at this step on the first attempt (restart count 0)");
  return d;
}

void Require(bool ok, const std::string& message) {
  if (!ok) throw UsageError("train: " + message);
}

}  // namespace

TrainOptions ParseTrainOptions(const std::vector<std::string>& args) {
  TrainOptions o;
  po::options_description d = Describe(o);
  po::variables_map vm;
  try {
    po::positional_options_description none;  // any stray word is an error
    po::store(po::command_line_parser(args).options(d).positional(none).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("train: ") + e.what());
  }
  o.preflight = vm.count("no-preflight") == 0;
  if (o.help) return o;
  Require(o.model == "mlp" || o.model == "cnn",
          "--model must be mlp or cnn, got '" + o.model + "'");
  Require(o.steps > 0 || o.epochs > 0, "--steps or --epochs must be > 0");
  Require(o.epochs >= 0, "--epochs must be >= 0");
  Require(o.batch_size > 0, "--batch-size must be > 0");
  Require(o.lr > 0, "--lr must be > 0");
  Require(o.momentum >= 0 && o.momentum < 1, "--momentum must be in [0, 1)");
  Require(o.grad_accum > 0, "--grad-accum must be > 0");
  Require(o.checkpoint_every >= 0, "--checkpoint-every must be >= 0");
  Require(o.checkpoint_every == 0 || !o.checkpoint_dir.empty(),
          "--checkpoint-every needs --checkpoint-dir");
  Require(!o.resume || !o.checkpoint_dir.empty(), "--resume needs --checkpoint-dir");
  Require(o.samples > 0, "--samples must be > 0");
  Require(o.features > 0 && o.classes > 1 && o.hidden > 0,
          "--features, --hidden must be > 0 "
          "and --classes > 1");
  Require(o.image_size >= 8, "--image-size must be >= 8");
  Require(o.bucket_mb > 0, "--bucket-mb must be > 0");
  Require(o.heartbeat_interval_s >= 0, "--heartbeat-interval must be >= 0");
  Require(o.backend == "auto" || o.backend == "gloo" || o.backend == "nccl",
          "--backend must be auto, gloo or nccl");
  Require(o.device == "cpu" || o.device == "cuda", "--device must be cpu or cuda");
  Require(o.transport == "auto" || o.transport == "shm" || o.transport == "tcp",
          "--transport must be auto, shm or tcp");
  Require(o.backend != "nccl" || o.device == "cuda", "--backend nccl needs --device cuda");
  Require(o.collective_timeout_s > 0, "--timeout must be > 0");
  return o;
}

void ValidateTrainArgs(const std::vector<std::string>& args) { ParseTrainOptions(args); }

std::string TrainOptionsHelp() {
  TrainOptions o;
  std::ostringstream out;
  out << "usage: dlaunch --nproc N train [options]\n" << Describe(o);
  return out.str();
}

}  // namespace dlaunch::worker
