// Pure-logic tests of the trainer's torch-free parts: options, data file, sampler, buckets, tables.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "worker/train/bucket_plan.h"
#include "worker/train/data_set.h"
#include "worker/train/distributed_sampler.h"
#include "worker/train/train.h"
#include "worker/train/train_options.h"
#include "worker/train/train_reporter.h"

namespace dlaunch::worker {
namespace {

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
      {"--model", "resnet"},
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
      {"--bucket-mb", "0"},
  };
  for (const auto& args : bad) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_THROW(ValidateTrainArgs(args), UsageError) << joined;
  }
  EXPECT_NO_THROW(ValidateTrainArgs({"--checkpoint-dir", "/tmp/x", "--resume"}));
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

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/dlaunch-train-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(DataSetTest, ReadsCsv) {
  TempDir dir;
  const std::string path = dir.path() + "/d.csv";
  std::ofstream(path) << "# two features, label\n1.5,2,0\n\n-3,4e-1,2\r\n";
  DataSet d = ReadDataSetFile(path);
  EXPECT_EQ(d.size, 2);
  EXPECT_EQ(d.feature_dim, 2);
  EXPECT_EQ(d.classes, 3);
  EXPECT_EQ(d.features, (std::vector<float>{1.5f, 2.f, -3.f, 0.4f}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{0, 2}));
}

TEST(DataSetTest, BadCsvNamesTheLine) {
  TempDir dir;
  const std::string path = dir.path() + "/d.csv";
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
  EXPECT_THROW(ReadDataSetFile(dir.path() + "/missing.csv"), UsageError);
}

TEST(DataSetTest, SyntheticIsDeterministic) {
  DataSet a = MakeSyntheticDataSet(50, 8, 3, 5), b = MakeSyntheticDataSet(50, 8, 3, 5);
  EXPECT_EQ(a.features, b.features);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.features, MakeSyntheticDataSet(50, 8, 3, 6).features);
}

TEST(TelemetryFormatTest, JsonAndTable) {
  TelemetrySample s;
  s.step = 5;
  s.comm_wait_ms = 1.5;
  nlohmann::json j = TelemetryJson(s);
  for (const char* key :
       {"step", "loss", "phase", "samples_per_sec", "compute_ms", "comm_wait_ms",
        "bytes_communicated", "rss_bytes", "peak_rss_bytes", "device_allocated_bytes",
        "device_reserved_bytes", "device_peak_bytes", "device_free_bytes", "device_total_bytes"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["step"], 5);
  std::string table =
      FormatRankTable({{0, 100 << 20, 0.25, 1000, 2}, {1, 200 << 20, 0.5, 900, 3}}, "cpu");
  EXPECT_NE(table.find("25.0%"), std::string::npos) << table;
  EXPECT_NE(table.find("1900.0"), std::string::npos) << table;
  EXPECT_NE(FormatProgressLine(3, 10, 0.5, 100, 2, 12.5).find("slowest rank 2"), std::string::npos);
}

}  // namespace
}  // namespace dlaunch::worker
