// RunTrain end to end, ranks as threads over one in-memory store and real Gloo: the whole trainer
// (sampler, DDP, checkpoints, telemetry) against a single-rank run, resumes, OOM and bad flags.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/run_dir/events_file.h"
#include "core/store.h"
#include "tests/common/test_dir.h"
#include "tests/train/train_test_util.h"
#include "worker/train/checkpoint.h"
#include "worker/train/models.h"
#include "worker/train/train.h"

namespace dlaunch::worker {
namespace {

using dlaunch::testing::TestDir;

const std::vector<std::string> kBase = {
    "--data",   "synthetic", "--model",   "mlp",       "--features", "16",
    "--hidden", "32",        "--classes", "4",         "--samples",  "512",
    "--lr",     "0.05",      "--quiet",   "--timeout", "60"};

std::vector<std::string> Args(std::vector<std::string> extra) {
  std::vector<std::string> a = kBase;
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// Runs `world` ranks of RunTrain with `args`; returns their exit codes.
std::vector<int> RunWorld(int world, const std::vector<std::string>& args,
                          const std::string& run_dir, int restart_count = 0) {
  auto store = core::MakeMemoryStore();
  std::vector<int> codes(world, -1);
  testing::RunRanks(world, [&](int rank) {
    TrainContext ctx;
    ctx.rank = rank;
    ctx.world_size = world;
    ctx.local_rank = rank;
    ctx.restart_count = restart_count;
    ctx.store = store;
    ctx.run_dir = run_dir;
    ctx.rank_dir = run_dir + "/rank" + std::to_string(rank);
    std::filesystem::create_directories(ctx.rank_dir);
    codes[rank] = RunTrain(ctx, args);
  });
  return codes;
}

// Final parameters from the checkpoint a run left in `dir`.
std::vector<torch::Tensor> CheckpointParams(const std::string& dir, int64_t global_batch) {
  auto model = MakeModel("mlp", {16, 0, 0, 4, 32});
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  CheckpointManifest expect;
  expect.key.model = "mlp";
  expect.per_rank_batch = global_batch;  // either batch kept lets it load
  expect.global_batch = global_batch;
  auto meta = LoadCheckpoint(dir, expect, *model, opt);
  EXPECT_TRUE(meta.has_value()) << dir;
  std::vector<torch::Tensor> out;
  for (auto& p : model->parameters()) out.push_back(p.detach().clone());
  return out;
}

double MaxDiff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  }
  return d;
}

std::vector<nlohmann::json> ReadEvents(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

class TrainRunTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

// --linear-kernel onednn changes the kernel only: the same parameter names and initial values (so
// checkpoints load either way), the same outputs and gradients up to float rounding.
TEST_F(TrainRunTest, OneDnnLinearComputesWhatLinearComputes) {
  for (const std::string name : {"mlp", "cnn"}) {
    ModelShape shape{256, 16, 16, 10, 32};
    torch::manual_seed(5);
    auto blas = MakeModel(name, shape);
    shape.onednn_linear = true;
    torch::manual_seed(5);
    auto onednn = MakeModel(name, shape);
    auto a = blas->named_parameters(), b = onednn->named_parameters();
    ASSERT_EQ(a.keys(), b.keys()) << name;
    for (const auto& key : a.keys()) EXPECT_TRUE(a[key].equal(b[key])) << name << " " << key;
    torch::Tensor x = torch::randn({20, 256});
    torch::Tensor ya = blas->forward(x), yb = onednn->forward(x);
    EXPECT_LE((ya - yb).abs().max().item<double>(), 1e-4) << name;
    ya.square().sum().backward();
    yb.square().sum().backward();
    for (const auto& key : a.keys()) {
      const double scale = a[key].grad().abs().max().item<double>() + 1;
      EXPECT_LE((a[key].grad() - b[key].grad()).abs().max().item<double>(), 1e-4 * scale)
          << name << " " << key;
    }
  }
}

// The cnn as written in its comment, from the model's own parameters: conv, BN, ReLU, then NCHW
// max pooling, block by block.
torch::Tensor ReferenceCnn(torch::nn::Sequential& m, const torch::Tensor& x) {
  auto p = m->named_parameters();
  auto block = [&](torch::Tensor h, const std::string& conv, const std::string& bn) {
    h = torch::conv2d(h, p[conv + ".weight"], {}, 1, 1);
    h = torch::batch_norm(h, p[bn + ".weight"], p[bn + ".bias"], {}, {}, true, 0.1, 1e-5, false);
    return torch::max_pool2d(torch::relu(h), 2);
  };
  torch::Tensor h = block(x.view({x.size(0), 1, 16, 16}), "1", "2");
  h = block(h, "5", "6").flatten(1);
  h = torch::relu(torch::linear(h, p["10.weight"], p["10.bias"]));
  return torch::linear(h, p["12.weight"], p["12.bias"]);
}

// The cnn pools before its ReLU and pools through the channels-last kernel: the same outputs and
// gradients bit for bit, ties included (the inputs are small integers, so windows hold equal
// values, and many are not positive).
TEST_F(TrainRunTest, CnnComputesItsReferenceExactly) {
  torch::manual_seed(11);
  auto model = MakeModel("cnn", ModelShape{256, 16, 16, 10, 32});
  torch::Tensor x = torch::randint(-2, 3, {12, 256}).to(torch::kFloat32);
  torch::Tensor y = model->forward(x);
  y.square().sum().backward();
  std::map<std::string, torch::Tensor> grads;
  for (const auto& item : model->named_parameters()) {
    grads[item.key()] = item.value().grad().clone();
    item.value().mutable_grad().reset();
  }
  torch::Tensor ref = ReferenceCnn(model, x);
  EXPECT_TRUE(ref.equal(y));
  ref.square().sum().backward();
  for (const auto& item : model->named_parameters())
    EXPECT_TRUE(item.value().grad().equal(grads[item.key()])) << item.key();
}

TEST_F(TrainRunTest, FourRanksMatchOneRankWithFourTimesTheBatch) {
  TestDir one("train"), four("train");
  auto c1 = RunWorld(
      1, Args({"--steps", "12", "--batch-size", "32", "--checkpoint-dir", one.string() + "/ckpt"}),
      one.string());
  auto c4 = RunWorld(4,
                     Args({"--steps", "12", "--batch-size", "8", "--checkpoint-dir",
                           four.string() + "/ckpt", "--bucket-mb", "0.001"}),
                     four.string());
  EXPECT_EQ(c1, std::vector<int>{0});
  EXPECT_EQ(c4, (std::vector<int>{0, 0, 0, 0}));
  auto p1 = CheckpointParams(one.string() + "/ckpt", 32);
  auto p4 = CheckpointParams(four.string() + "/ckpt", 32);
  EXPECT_LE(MaxDiff(p1, p4), 1e-5);
}

TEST_F(TrainRunTest, CheckpointThenResumeEndsWhereUninterruptedRunEnds) {
  TestDir straight("train"), split("train");
  // 512 samples / 2 ranks / batch 16 = 16 steps per epoch: 40 steps cross two epoch boundaries.
  auto common = Args({"--batch-size", "16", "--grad-accum", "1", "--no-preflight"});
  auto with = [&](std::vector<std::string> extra) {
    auto a = common;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  EXPECT_EQ(RunWorld(2, with({"--steps", "40", "--checkpoint-dir", straight.string() + "/c"}),
                     straight.string()),
            (std::vector<int>{0, 0}));
  // Interrupted: an injected failure at step 23 after a checkpoint at step 20.
  EXPECT_EQ(RunWorld(2,
                     with({"--steps", "40", "--checkpoint-dir", split.string() + "/c",
                           "--checkpoint-every", "10", "--fail-at-step", "23"}),
                     split.string()),
            (std::vector<int>{1, 1}));
  auto error = nlohmann::json::parse(std::ifstream(split.string() + "/rank0/error.json"));
  EXPECT_EQ(error["kind"], "error");
  EXPECT_EQ(error["step"], 23);
  // The restart (restart count 1) resumes by itself from the step-20 checkpoint.
  EXPECT_EQ(RunWorld(2,
                     with({"--steps", "40", "--checkpoint-dir", split.string() + "/c",
                           "--checkpoint-every", "10", "--fail-at-step", "23"}),
                     split.string(), /*restart_count=*/1),
            (std::vector<int>{0, 0}));
  bool resumed = false;
  for (auto& e : ReadEvents(split.string() + "/rank0/events.jsonl")) {
    if (e["kind"] == "resumed") {
      resumed = true;
      EXPECT_EQ(e["step"], 20);
    }
  }
  EXPECT_TRUE(resumed);
  EXPECT_LE(MaxDiff(CheckpointParams(straight.string() + "/c", 32),
                    CheckpointParams(split.string() + "/c", 32)),
            1e-6);
  // --resume explicitly: a finished checkpoint at step 40 means nothing left to do.
  EXPECT_EQ(
      RunWorld(2, with({"--steps", "40", "--checkpoint-dir", split.string() + "/c", "--resume"}),
               split.string()),
      (std::vector<int>{0, 0}));
}

TEST_F(TrainRunTest, WritesTelemetryEvents) {
  TestDir dir("train");
  auto codes = RunWorld(2,
                        Args({"--steps", "30", "--batch-size", "8", "--heartbeat-interval", "0.001",
                              "--memory-every", "10"}),
                        dir.string());
  ASSERT_EQ(codes, (std::vector<int>{0, 0}));
  for (int r = 0; r < 2; ++r) {
    auto events = ReadEvents(dir.string() + "/rank" + std::to_string(r) + "/events.jsonl");
    int telemetry = 0;
    bool preflight = false, done = false;
    for (auto& e : events) {
      EXPECT_EQ(e["rank"], r);
      EXPECT_TRUE(e.contains("unix_ms"));
      if (e["kind"] == "preflight") preflight = e["ok"].get<bool>();
      if (e["kind"] != "telemetry") continue;
      ++telemetry;
      EXPECT_GT(e["rss_bytes"].get<int64_t>(), 0);
      EXPECT_GE(e["peak_rss_bytes"].get<int64_t>(), e["rss_bytes"].get<int64_t>());
      EXPECT_GE(e["compute_ms"].get<double>(), 0);
      EXPECT_GE(e["comm_wait_ms"].get<double>(), 0);
      if (e["phase"] == "done") {
        // The closing event adds whole-run figures; its window may hold no step.
        done = true;
        EXPECT_GT(e["step_ms_median"].get<double>(), 0);
        EXPECT_GT(e["run_samples_per_sec"].get<double>(), 0);
      } else {
        EXPECT_GT(e["bytes_communicated"].get<int64_t>(), 0);
        EXPECT_GT(e["samples_per_sec"].get<double>(), 0);
      }
    }
    EXPECT_GE(telemetry, 2) << "rank " << r;
    // Memory checkpoints: each of the first 10 steps, then every --memory-every (here 10) steps.
    std::vector<int64_t> memory_steps;
    for (auto& e : events) {
      if (e["kind"] != "memory") continue;
      memory_steps.push_back(e["step"].get<int64_t>());
      for (const char* phase : {"data", "forward", "backward", "optimizer"}) {
        EXPECT_GT(e["phases"][phase]["rss_bytes"].get<int64_t>(), 0) << phase << e.dump();
      }
      EXPECT_GT(e["counters"]["memory"]["rss MiB"].get<double>(), 0) << e.dump();
      EXPECT_TRUE(e["counters"]["throughput"].contains("samples/s")) << e.dump();
    }
    EXPECT_EQ(memory_steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 21}))
        << "rank " << r;
    EXPECT_TRUE(preflight) << "rank " << r;
    EXPECT_TRUE(done) << "rank " << r;
    // What diagnosis reads back: every telemetry line with the memory figures the trainer wrote
    // (host figures on CPU, the device ones unknown), and the same seven in the memory lines.
    rundir::EventsFile back;
    std::vector<std::string> problems;
    ASSERT_EQ(rundir::ReadEvents(dir.string() + "/rank" + std::to_string(r) + "/events.jsonl",
                                 "events.jsonl", &back, &problems),
              rundir::FileState::kOk);
    EXPECT_TRUE(problems.empty());
    ASSERT_EQ(static_cast<int>(back.telemetry.size()), telemetry);
    for (const rundir::TelemetrySample& s : back.telemetry) {
      EXPECT_GT(s.rss_bytes, 0);
      EXPECT_GE(s.peak_rss_bytes, s.rss_bytes);
      EXPECT_EQ(s.device_allocated_bytes, -1);
      EXPECT_EQ(s.total_steps, 30);
      EXPECT_FALSE(s.phase.empty());
    }
    for (auto& e : events) {
      if (e["kind"] != "memory") continue;
      const rundir::MemoryFigures m = rundir::GetMemoryFigures(e["phases"]["backward"]);
      EXPECT_EQ(rundir::MemoryFiguresJson(m), e["phases"]["backward"]) << e.dump();
      EXPECT_GE(m.peak_rss_bytes, m.rss_bytes);
    }
  }
}

// A CNN on a tiny IDX data set (written here): it learns, and rank 0 reports a distributed
// evaluation after every epoch over exactly the test set.
TEST_F(TrainRunTest, LearnsTinyIdxDataSetAndEvaluatesEveryEpoch) {
  TestDir data("train"), run("train");
  testing::WriteTinyIdxDataSet(data.string(), 640, 203);
  auto codes = RunWorld(
      2,
      {"--data-dir", data.string(), "--model", "cnn", "--epochs", "3", "--batch-size", "16", "--lr",
       "0.05", "--warmup-steps", "5", "--quiet", "--no-preflight", "--timeout", "60"},
      run.string());
  ASSERT_EQ(codes, (std::vector<int>{0, 0}));
  std::vector<nlohmann::json> evals;
  for (auto& e : ReadEvents(run.string() + "/rank0/events.jsonl")) {
    if (e["kind"] == "eval") evals.push_back(e);
  }
  ASSERT_EQ(evals.size(), 3u);
  for (size_t i = 0; i < evals.size(); ++i) {
    EXPECT_EQ(evals[i]["event"], "eval");
    EXPECT_EQ(evals[i]["epoch"], static_cast<int>(i + 1));
    EXPECT_EQ(evals[i]["images"], 203);  // shards of 102 + 101, none twice
    EXPECT_GE(evals[i]["test_accuracy"].get<double>(), 0.0);
    EXPECT_GT(evals[i]["test_loss"].get<double>(), 0.0);
  }
  EXPECT_GE(evals.back()["test_accuracy"].get<double>(), 0.9) << evals.back().dump();
  EXPECT_LT(evals.back()["test_loss"].get<double>(), evals.front()["test_loss"].get<double>());
  // Only rank 0 reports the evaluation.
  for (auto& e : ReadEvents(run.string() + "/rank1/events.jsonl")) EXPECT_NE(e["kind"], "eval");
}

TEST_F(TrainRunTest, Bf16AutocastTrainsOnCpu) {
  TestDir dir("train");
  auto codes =
      RunWorld(2,
               {"--data", "synthetic", "--model", "cnn", "--image-size", "8", "--samples", "256",
                "--amp", "--steps", "6", "--batch-size", "8", "--no-preflight", "--quiet"},
               dir.string());
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST_F(TrainRunTest, BadArgumentsExitTwo) {
  TestDir dir("train");
  EXPECT_EQ(RunWorld(1, {"--model", "transformer"}, dir.string()), std::vector<int>{2});
  // Valid flags but a batch that no rank can fill: a usage error too, before any collective.
  EXPECT_EQ(RunWorld(2, Args({"--batch-size", "1000", "--no-preflight"}), dir.string()),
            (std::vector<int>{2, 2}));
}

TEST_F(TrainRunTest, OutOfMemoryIsReportedWithSnapshotAndAdvice) {
  TestDir dir("train");
  const std::string rank_dir = dir.string() + "/rank0";
  std::filesystem::create_directories(rank_dir);
  const std::string stderr_path = dir.string() + "/stderr.log";
  // cnn on 128x128 images, batch 256: the first conv output alone is 256*16*128*128*4 = 256 MiB.
  std::vector<std::string> argv = {TRAIN_OOM_CHILD, rank_dir,    "160", "--data",
                                   "synthetic",     "--model",   "cnn", "--image-size",
                                   "128",           "--samples", "256", "--batch-size",
                                   "256",           "--steps",   "2",   "--quiet"};
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::stringstream err;
  err << std::ifstream(stderr_path).rdbuf();
  ASSERT_TRUE(WIFEXITED(status)) << err.str();
  EXPECT_EQ(WEXITSTATUS(status), 1) << err.str();
  EXPECT_NE(err.str().find("OOM on rank 0: "), std::string::npos) << err.str();
  auto error = nlohmann::json::parse(std::ifstream(rank_dir + "/error.json"));
  EXPECT_EQ(error["kind"], "oom");
  EXPECT_EQ(error["rank"], 0);
  EXPECT_GT(error["tried_to_allocate_bytes"].get<int64_t>(), 0) << error.dump();
  for (const char* key : {"allocated_bytes", "reserved_bytes", "peak_bytes", "total_bytes"}) {
    EXPECT_GT(error["memory"][key].get<int64_t>(), 0) << key << " " << error.dump();
  }
  std::string advice = error["advice"].dump();
  EXPECT_NE(advice.find("--batch-size"), std::string::npos) << advice;
  EXPECT_NE(advice.find("--grad-accum"), std::string::npos) << advice;
  EXPECT_NE(advice.find("--amp"), std::string::npos) << advice;
  bool oom_event = false;
  for (auto& e : ReadEvents(rank_dir + "/events.jsonl")) oom_event |= e["kind"] == "oom";
  EXPECT_TRUE(oom_event);
}

}  // namespace
}  // namespace dlaunch::worker
