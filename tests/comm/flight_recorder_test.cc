#include "core/comm/flight_recorder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"

namespace dlaunch::core {
namespace {

namespace fs = std::filesystem;

TEST(FlightRecorderTest, SeqStartsAtZeroAndStatesAdvance) {
  FlightRecorder fr(3, 4, "gloo");
  EXPECT_EQ(2000u, fr.capacity());
  EXPECT_EQ(-1, fr.last_started_seq());
  int64_t a = fr.Record("allreduce", DataType::kFloat32, 10, 40);
  int64_t b = fr.Record("send", DataType::kInt64, 2, 16, 1);
  EXPECT_EQ(0, a);
  EXPECT_EQ(1, b);
  fr.Start(a);
  EXPECT_EQ("allreduce", fr.current_op());
  ASSERT_TRUE(fr.OldestInFlight().has_value());
  EXPECT_EQ(0, fr.OldestInFlight()->seq);
  fr.Complete(a);
  fr.Start(b);
  fr.Fail(b, "peer gone");
  EXPECT_EQ(1, fr.last_started_seq());
  EXPECT_EQ(0, fr.last_completed_seq());
  EXPECT_FALSE(fr.OldestInFlight().has_value());
  auto entries = fr.Entries();
  ASSERT_EQ(2u, entries.size());
  EXPECT_EQ(OpState::kCompleted, entries[0].state);
  EXPECT_EQ(OpState::kFailed, entries[1].state);
  EXPECT_EQ("peer gone", entries[1].error);
  EXPECT_EQ(1, entries[1].peer);
}

TEST(FlightRecorderTest, RingKeepsTheNewestEntries) {
  FlightRecorder fr(0, 1, "gloo", 5);
  for (int i = 0; i < 12; ++i) fr.Complete(fr.Record("barrier", DataType::kUint8, 0, 0));
  auto entries = fr.Entries();
  ASSERT_EQ(5u, entries.size());
  EXPECT_EQ(7, entries.front().seq);
  EXPECT_EQ(11, entries.back().seq);
  fr.Start(2);  // long overwritten: ignored, not corrupting a live slot
  EXPECT_EQ(OpState::kCompleted, fr.Entries()[0].state);
}

TEST(FlightRecorderTest, DumpHasTheSharedFormat) {
  FlightRecorder fr(1, 2, "gloo", 100);
  int64_t s = fr.Record("broadcast", DataType::kBFloat16, 8, 16, -1, 0);
  fr.Start(s);
  fr.Complete(s);
  fr.Start(fr.Record("allreduce", DataType::kFloat32, 4, 16));
  fs::path dir = fs::path(::testing::TempDir()) / "dlaunch_fr_test";
  fs::create_directories(dir);
  fs::path path = dir / "flight.json";
  fr.DumpJson(path.string(), "request");
  EXPECT_FALSE(fs::exists(path.string() + ".tmp"));
  std::ifstream in(path);
  auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(1, doc["rank"]);
  EXPECT_EQ(2, doc["world_size"]);
  EXPECT_EQ("gloo", doc["backend"]);
  EXPECT_EQ("request", doc["reason"]);
  EXPECT_EQ(100, doc["capacity"]);
  EXPECT_GT(doc["dumped_unix_ms"].get<int64_t>(), 1600000000000);
  ASSERT_EQ(2u, doc["entries"].size());
  const auto& e0 = doc["entries"][0];
  for (const char* key :
       {"seq", "op", "dtype", "count", "bytes", "peer", "root", "state", "scheduled_unix_ns",
        "started_unix_ns", "completed_unix_ns", "duration_us", "error"}) {
    EXPECT_TRUE(e0.contains(key)) << key;
  }
  EXPECT_EQ("broadcast", e0["op"]);
  EXPECT_EQ("bfloat16", e0["dtype"]);
  EXPECT_EQ(0, e0["root"]);
  EXPECT_EQ(-1, e0["peer"]);
  EXPECT_EQ("completed", e0["state"]);
  EXPECT_GE(e0["completed_unix_ns"].get<int64_t>(), e0["started_unix_ns"].get<int64_t>());
  const auto& e1 = doc["entries"][1];
  EXPECT_EQ("started", e1["state"]);
  EXPECT_EQ(0, e1["completed_unix_ns"]);
  EXPECT_EQ(0, e1["duration_us"]);
}

TEST(FlightRecorderTest, DumpToAMissingDirectoryThrows) {
  FlightRecorder fr(0, 1, "gloo");
  EXPECT_THROW(fr.DumpJson("/nonexistent-dir/x/flight.json", "exit"), Error);
}

TEST(FlightRecorderTest, ConcurrentRecordingGivesUniqueSeqs) {
  FlightRecorder fr(0, 1, "gloo", 10000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) fr.Complete(fr.Record("allreduce", DataType::kFloat32, 1, 4));
    });
  }
  for (auto& t : threads) t.join();
  auto entries = fr.Entries();
  ASSERT_EQ(4000u, entries.size());
  for (size_t i = 0; i < entries.size(); ++i) EXPECT_EQ(static_cast<int64_t>(i), entries[i].seq);
  EXPECT_EQ(3999, fr.last_completed_seq());
}

}  // namespace
}  // namespace dlaunch::core
