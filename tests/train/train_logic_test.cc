// Pure-logic tests of the trainer's torch-free parts: options, data file, sampler, buckets, tables.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "ddp/bucket_plan.h"
#include "tests/common/test_dir.h"
#include "tests/train/train_test_util.h"
#include "worker/train/data_set.h"
#include "worker/train/distributed_sampler.h"
#include "worker/train/idx_file.h"
#include "worker/train/train.h"
#include "worker/train/train_options.h"
#include "worker/train/train_reporter.h"

namespace dlaunch::worker {
namespace {

using ddp::PlanBuckets;

TEST(TrainOptionsTest, DefaultsAndValues) {
  TrainOptions o = ParseTrainOptions({"--model", "cnn", "--steps", "7", "--batch-size", "3",
                                      "--grad-accum", "2", "--no-preflight", "--bucket-mb", "0.5"});
  EXPECT_EQ(o.model, "cnn");
  EXPECT_EQ(o.steps, 7);
  EXPECT_EQ(o.batch_size, 3);
  EXPECT_EQ(o.grad_accum, 2);
  EXPECT_FALSE(o.preflight);
  EXPECT_DOUBLE_EQ(o.bucket_mb, 0.5);
  EXPECT_TRUE(ParseTrainOptions({}).preflight);
  EXPECT_DOUBLE_EQ(ParseTrainOptions({}).bucket_mb, 25.0);
}

TEST(TrainOptionsTest, BadOptionsThrowUsageError) {
  const std::vector<std::vector<std::string>> bad = {
      {"--model", "transformer"},
      {"--lr", "inf"},
      {"--lr", "nan"},
      {"--amp", "fp16"},  // CPU: no gradient scaler
      {"--amp", "fp8"},
      {"--lr-schedule", "linear"},
      {"--lr-gamma", "2"},
      {"--warmup-steps", "-1"},
      {"--eval-every", "-1"},
      {"--steps", "0", "--epochs", "0"},
      {"--timeout", "1e300"},
      {"--data", "synthetic", "--data-dir", "/tmp"},
      {"--data-dir", "/nonexistent-idx-dir"},
      {"--data", "/nonexistent.csv"},
      {"--batch-size", "0"},
      {"--steps", "abc"},
      {"--no-such-flag"},
      {"stray"},
      {"--lr", "-1"},
      {"--grad-accum", "0"},
      {"--resume"},  // needs --checkpoint-dir
      {"--checkpoint-every", "5"},
      {"--backend", "mpi"},
      {"--backend", "nccl"},  // needs --device cuda
      {"--heartbeat-interval", "-2"},
      {"--heartbeat-interval", "1e-9"},  // #30: accepted, then a flood of events
      {"--fail-at-step", "-3"},          // #30: accepted, and never failed
      {"--bucket-mb", "0"},
      {"--linear-kernel", "mkl"},
  };
  for (const auto& args : bad) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_THROW(ValidateTrainArgs(args), UsageError) << joined;
  }
  EXPECT_NO_THROW(
      ValidateTrainArgs({"--checkpoint-dir", "/tmp/x", "--resume", "--data", "synthetic"}));
  EXPECT_EQ(ParseTrainOptions({"--amp"}).amp, "bf16");
  EXPECT_EQ(ParseTrainOptions({"--amp", "bf16", "--steps", "3"}).amp, "bf16");
  EXPECT_EQ(ParseTrainOptions({"--amp", "fp16", "--device", "cuda"}).amp, "fp16");
  EXPECT_TRUE(ParseTrainOptions({"--help"}).help);
  EXPECT_EQ(ParseTrainOptions({}).linear_kernel, "auto");
  EXPECT_EQ(ParseTrainOptions({"--linear-kernel", "blas"}).linear_kernel, "blas");
}

TEST(DistributedSamplerTest, ShardsAreDisjointAndCoverEpoch) {
  const int64_t n = 103;
  const int world = 4;
  std::multiset<int64_t> seen;
  for (int r = 0; r < world; ++r) {
    DistributedSampler s(n, r, world, 7);
    auto idx = s.Indices(3);
    EXPECT_EQ(static_cast<int64_t>(idx.size()), s.samples_per_rank());
    seen.insert(idx.begin(), idx.end());
  }
  // 104 slots for 103 samples: every sample once, one padded repeat.
  EXPECT_EQ(seen.size(), 104u);
  for (int64_t i = 0; i < n; ++i) EXPECT_GE(seen.count(i), 1u) << i;
  DistributedSampler a(n, 0, world, 7);
  EXPECT_EQ(a.Indices(3), a.Indices(3));
  EXPECT_NE(a.Indices(3), a.Indices(4));
}

TEST(DistributedSamplerTest, UnionOfRankBatchesIsTheSingleRankBatch) {
  const int64_t n = 256, b = 4;
  const int world = 4;
  std::vector<int64_t> one = DistributedSampler(n, 0, 1, 11).Indices(0);
  for (int64_t step = 0; step < 3; ++step) {
    std::multiset<int64_t> multi,
        single(one.begin() + step * world * b, one.begin() + (step + 1) * world * b);
    for (int r = 0; r < world; ++r) {
      auto idx = DistributedSampler(n, r, world, 11).Indices(0);
      multi.insert(idx.begin() + step * b, idx.begin() + (step + 1) * b);
    }
    EXPECT_EQ(multi, single) << "step " << step;
  }
}

TEST(BucketPlanTest, ReverseOrderAndCap) {
  // 4-byte elements: params of 10, 20, 30, 40 elements; cap 200 bytes = 50 elements.
  auto buckets = PlanBuckets({10, 20, 30, 40}, 4, 200);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{3}));
  EXPECT_EQ(buckets[1].params, (std::vector<size_t>{2, 1}));
  EXPECT_EQ(buckets[1].offsets, (std::vector<size_t>{0, 30}));
  EXPECT_EQ(buckets[2].params, (std::vector<size_t>{0}));
  EXPECT_EQ(PlanBuckets({10, 20, 30, 40}, 4, 1 << 30).size(), 1u);
  EXPECT_EQ(PlanBuckets({10, 20, 30, 40}, 4, 1).size(), 4u);  // oversized params stand alone
  EXPECT_TRUE(PlanBuckets({}, 4, 100).empty());
}

using dlaunch::testing::TestDir;

TEST(DataSetTest, ReadsCsv) {
  TestDir dir("train");
  const std::string path = dir.string() + "/d.csv";
  std::ofstream(path) << "# two features, label\n1.5,2,0\n\n-3,4e-1,2\r\n";
  DataSet d = ReadDataSetFile(path);
  EXPECT_EQ(d.size, 2);
  EXPECT_EQ(d.feature_dim, 2);
  EXPECT_EQ(d.classes, 3);
  EXPECT_EQ(d.features, (std::vector<float>{1.5f, 2.f, -3.f, 0.4f}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{0, 2}));
}

TEST(DataSetTest, BadCsvNamesTheLine) {
  TestDir dir("train");
  const std::string path = dir.string() + "/d.csv";
  std::ofstream(path) << "1,2,0\n1,2,3,0\n";
  try {
    ReadDataSetFile(path);
    FAIL() << "no throw";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(":2:"), std::string::npos) << e.what();
  }
  std::ofstream(path) << "1,2,0.5\n";
  EXPECT_THROW(ReadDataSetFile(path), UsageError);
  std::ofstream(path) << "1,x,0\n";
  EXPECT_THROW(ReadDataSetFile(path), UsageError);
  EXPECT_THROW(ReadDataSetFile(dir.string() + "/missing.csv"), UsageError);
}

TEST(DataSetTest, SyntheticIsDeterministic) {
  DataSet a = MakeSyntheticDataSet(50, 8, 3, 5), b = MakeSyntheticDataSet(50, 8, 3, 5);
  EXPECT_EQ(a.features, b.features);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.features, MakeSyntheticDataSet(50, 8, 3, 6).features);
}

// The telemetry line itself is core/run_dir's (tests/run_dir).
TEST(TelemetryFormatTest, RankTable) {
  std::string table = FormatRankTable(
      {{0, 100 << 20, -1, 150 << 20, 0.25, 1000, 2}, {1, 200 << 20, -1, 250 << 20, 0.5, 900, 3}},
      "cpu");
  EXPECT_NE(table.find("25.0%"), std::string::npos) << table;
  EXPECT_NE(table.find("250.0 MiB"), std::string::npos) << table;
  EXPECT_NE(table.find("peak rss"), std::string::npos) << table;
  std::string gpu = FormatRankTable(
      {{0, 1024.0 * 1048576, 2048.0 * 1048576, 3072.0 * 1048576, 0.1, 10, 1}}, "cuda");
  for (const char* column : {"allocated", "reserved", "peak", "1.0 GiB", "2.0 GiB"}) {
    EXPECT_NE(gpu.find(column), std::string::npos) << column << "\n" << gpu;
  }
  EXPECT_NE(table.find("1900.0"), std::string::npos) << table;
  EXPECT_NE(FormatProgressLine(3, 10, 0.5, 100, 2, 12.5).find("slowest rank 2"), std::string::npos);
  EXPECT_EQ(
      FormatProgressLine(3, 10, 0.5, 100, 2, 12.5, 0.8421),
      "step 3/10  loss 0.5000  train acc 84.2%  100 samples/s  slowest rank 2 (12.5 ms/step)");
}

// The message of the UsageError `fn` throws ("" when none).
template <typename Fn>
std::string UsageMessage(Fn fn) {
  try {
    fn();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(IdxFileTest, ReadsGoodFilesPlainAndGzip) {
  TestDir dir("train");
  std::vector<uint8_t> pixels(3 * 2 * 4);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i);
  for (const std::string name : {"/a.idx", "/a.idx.gz"}) {
    testing::WriteFile(dir.string() + name, testing::IdxBytes({3, 2, 4}, pixels));
    IdxHeader h = ReadIdxHeader(dir.string() + name, 3);
    EXPECT_EQ(h.dims, (std::vector<int64_t>{3, 2, 4})) << name;
    EXPECT_EQ(h.data_bytes, 24);
    IdxHeader full;
    EXPECT_EQ(ReadIdxFile(dir.string() + name, 3, &full), pixels) << name;
    EXPECT_EQ(full.dims, h.dims);
  }
}

TEST(IdxFileTest, BadFilesAreUsageErrorsNamingTheFile) {
  TestDir dir("train");
  const std::vector<uint8_t> data(2 * 3 * 3, 7);
  const std::string good = testing::IdxBytes({2, 3, 3}, data);
  struct Case {
    std::string name, bytes, expect;
    int dims;
  };
  std::string bad_magic = good;
  bad_magic[0] = 1;
  std::string signed_type = good;
  signed_type[2] = 0x09;
  const std::vector<Case> cases = {
      {"truncated.gz", good.substr(0, good.size() - 5), "truncated", 3},
      {"truncated", good.substr(0, good.size() - 5), "truncated", 3},
      {"header-only.gz", good.substr(0, 6), "truncated", 3},
      {"longer.gz", good + "xx", "more data", 3},
      {"magic.gz", bad_magic, "bad magic", 3},
      {"type.gz", signed_type, "unsigned byte", 3},
      {"dims.gz", good, "has 3 dimensions, expected 1", 1},
      {"zero.gz", testing::IdxBytes({0, 3, 3}, {}), "out of range", 3},
  };
  for (const Case& c : cases) {
    const std::string path = dir.string() + "/" + c.name;
    testing::WriteFile(path, c.bytes);
    for (bool whole : {false, true}) {
      std::string msg = UsageMessage([&] {
        if (whole) {
          ReadIdxFile(path, c.dims, nullptr);
        } else {
          ReadIdxHeader(path, c.dims);
        }
      });
      EXPECT_NE(msg.find(path), std::string::npos) << c.name << ": " << msg;
      EXPECT_NE(msg.find(c.expect), std::string::npos)
          << c.name << " whole=" << whole << ": " << msg;
    }
  }
  // A gzip file cut short: the trailer check catches it cheaply, the full read for certain.
  const std::string cut = dir.string() + "/cut.gz";
  testing::WriteFile(dir.string() + "/big.gz",
                     testing::IdxBytes({50, 28, 28}, std::vector<uint8_t>(50 * 784, 3)));
  std::ifstream in(dir.string() + "/big.gz", std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  testing::WriteFile(cut, gz.substr(0, gz.size() / 2));
  EXPECT_NE(UsageMessage([&] { ReadIdxHeader(cut, 3); }).find(cut), std::string::npos);
  EXPECT_NE(UsageMessage([&] { ReadIdxFile(cut, 3, nullptr); }).find(cut), std::string::npos);
}

TEST(IdxFileTest, DataDirectoryChecksCountsAndShapes) {
  TestDir dir("train");
  testing::WriteTinyIdxDataSet(dir.string(), 40, 20);
  IdxDataFiles files = CheckIdxDataDir(dir.string());
  EXPECT_NE(files.test_labels.find("t10k-labels-idx1-ubyte.gz"), std::string::npos);
  TrainTestData d = LoadIdxDataSet(dir.string());
  EXPECT_EQ(d.train.size, 40);
  EXPECT_EQ(d.test.size, 20);
  EXPECT_EQ(d.train.height, 12);
  EXPECT_EQ(d.train.feature_dim, 144);
  EXPECT_EQ(d.train.classes, 10);
  EXPECT_GT(d.train.stddev, 0.f);
  EXPECT_EQ(d.train.mean, d.test.mean);  // the test split is normalised like the training split
  // 19 labels for 20 images.
  testing::WriteFile(dir.string() + "/t10k-labels-idx1-ubyte.gz",
                     testing::IdxBytes({19}, std::vector<uint8_t>(19, 1)));
  std::string msg = UsageMessage([&] { CheckIdxDataDir(dir.string()); });
  EXPECT_NE(msg.find("t10k-labels-idx1-ubyte.gz: holds 19 labels for 20 images"), std::string::npos)
      << msg;
  std::filesystem::remove(dir.string() + "/t10k-labels-idx1-ubyte.gz");
  msg = UsageMessage([&] { CheckIdxDataDir(dir.string()); });
  EXPECT_NE(msg.find("t10k-labels-idx1-ubyte"), std::string::npos) << msg;
  // The launcher's check: --data-dir with a broken file is a usage error naming it.
  testing::WriteFile(dir.string() + "/t10k-labels-idx1-ubyte", "garbage");
  msg = UsageMessage([&] { ValidateTrainArgs({"--data-dir", dir.string()}); });
  EXPECT_NE(msg.find(dir.string() + "/t10k-labels-idx1-ubyte"), std::string::npos) << msg;
}

TEST(DataSetTest, AugmentationShiftsAndFlipsDeterministically) {
  std::vector<uint8_t> img(5 * 2 * 8 * 8);
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<uint8_t>(i % 251 + 1);
  std::vector<uint8_t> a = img, b = img;
  std::mt19937_64 r1(3), r2(3);
  AugmentImages(a.data(), 10, 8, 8, r1);
  AugmentImages(b.data(), 10, 8, 8, r2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, img);
}

TEST(EvalShardTest, ShardsAreDisjointContiguousAndCoverTheSetOnce) {
  for (int64_t size : {0, 1, 7, 10000, 10001}) {
    for (int world : {1, 2, 3, 4, 7}) {
      int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        Shard s = EvalShard(size, r, world);
        EXPECT_EQ(s.begin, next) << size << "/" << world;  // no gap, no overlap
        EXPECT_LE(s.end - s.begin, size / world + 1);
        EXPECT_GE(s.end - s.begin, size / world);
        next = s.end;
      }
      EXPECT_EQ(next, size) << size << "/" << world;
    }
  }
}

TEST(LrScheduleTest, WarmupThenCosineStepOrConstant) {
  TrainOptions o = ParseTrainOptions({"--lr", "0.1", "--warmup-steps", "10"});
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(o, 0, 110), 0.01);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(o, 4, 110), 0.05);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(o, 10, 110), 0.1);     // cosine starts at the peak
  EXPECT_NEAR(ScheduledLearningRate(o, 60, 110), 0.05, 1e-12);  // half way down
  EXPECT_NEAR(ScheduledLearningRate(o, 110, 110), 0.0, 1e-12);
  EXPECT_GT(ScheduledLearningRate(o, 109, 110), 0.0);
  o = ParseTrainOptions({"--lr", "0.1", "--warmup-steps", "0", "--lr-schedule", "step",
                         "--lr-step-size", "30", "--lr-gamma", "0.5"});
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(o, 29, 100), 0.1);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(o, 30, 100), 0.05);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(o, 95, 100), 0.0125);
  o.lr_step_size = 0;  // a third of the run
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(o, 33, 99), 0.05);
  o = ParseTrainOptions({"--lr", "0.1", "--warmup-steps", "4", "--lr-schedule", "none"});
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(o, 1, 100), 0.05);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(o, 50, 100), 0.1);
}

TEST(DataSourceTest, ResolvesDataFlags) {
  EXPECT_EQ(ResolveDataSource(ParseTrainOptions({"--data", "synthetic"})).kind,
            DataSource::Kind::kSynthetic);
  DataSource csv = ResolveDataSource(ParseTrainOptions({"--data", "points.csv"}));
  EXPECT_EQ(csv.kind, DataSource::Kind::kCsv);
  EXPECT_EQ(csv.path, "points.csv");
  DataSource dir = ResolveDataSource(ParseTrainOptions({"--data-dir", "/d"}));
  EXPECT_EQ(dir.kind, DataSource::Kind::kIdx);
  EXPECT_EQ(dir.path, "/d");
  DataSource def = ResolveDataSource(ParseTrainOptions({}));
  EXPECT_TRUE(def.defaulted);
  EXPECT_EQ(def.kind, std::filesystem::is_directory(kFashionMnistDir)
                          ? DataSource::Kind::kIdx
                          : DataSource::Kind::kSynthetic);
}

}  // namespace
}  // namespace dlaunch::worker
