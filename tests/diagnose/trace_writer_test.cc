#include "launcher/diagnose/trace_writer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "launcher/diagnose/analyzer.h"
#include "tests/diagnose/test_util.h"

namespace dlaunch::launcher {
namespace {

TEST(TraceWriterTest, OneTrackPerRankWithCollectivesAndPhases) {
  RunSnapshot run = LoadRunDir(testing::FixturePath("hang_never_entered"));
  Diagnosis d = Analyze(run);
  const testing::TestDir tmp("diagnose");
  const std::string path = tmp.string() + "/trace.json";
  WriteTrace(run, &d, path);
  std::ifstream in(path);
  nlohmann::json trace = nlohmann::json::parse(in);  // throws on invalid JSON
  ASSERT_TRUE(trace["traceEvents"].is_array());

  std::set<int> slice_pids, named_pids;
  std::map<int, std::string> names;
  int collectives = 0, phases = 0;
  bool open_allreduce_on_rank0 = false;
  for (const auto& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph"));
    if (e["ph"] == "M" && e["name"] == "process_name") {
      named_pids.insert(e["pid"].get<int>());
      names[e["pid"].get<int>()] = e["args"]["name"];
    }
    if (e["ph"] != "X") continue;
    ASSERT_TRUE(e["ts"].is_number());
    ASSERT_GT(e["dur"].get<int64_t>(), 0);
    slice_pids.insert(e["pid"].get<int>());
    if (e["cat"] == "collective") ++collectives;
    if (e["cat"] == "phase") ++phases;
    if (e["pid"] == 0 && e["name"] == "allreduce #5 (started)") {
      open_allreduce_on_rank0 = true;
      EXPECT_NEAR(e["dur"].get<int64_t>() / 1e6, 310, 1);
    }
  }
  EXPECT_EQ(slice_pids, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(named_pids, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(names[2], "rank 2 (culprit)");
  EXPECT_EQ(names[0], "rank 0");
  EXPECT_EQ(collectives, 4 * 5 + 3);
  EXPECT_GT(phases, 4);
  EXPECT_TRUE(open_allreduce_on_rank0);
}

TEST(TraceWriterTest, CorruptRunStillGivesValidTrace) {
  RunSnapshot run = LoadRunDir(testing::FixturePath("corrupt"));
  nlohmann::json trace = BuildTrace(run, nullptr);
  nlohmann::json reparsed = nlohmann::json::parse(trace.dump());
  EXPECT_TRUE(reparsed["traceEvents"].is_array());
}

TEST(TraceWriterTest, CountersOfAnEventBecomeCounterTracks) {
  RunSnapshot run;
  run.world_size = 1;
  RankRecord rank;
  Event memory;
  memory.unix_ms = 1000;
  memory.kind = "memory";
  memory.body = {
      {"kind", "memory"},
      {"counters", {{"memory", {{"rss MiB", 254.5}}}, {"throughput", {{"samples/s", 9}}}}}};
  rank.events.events.push_back(memory);
  run.ranks.push_back(rank);
  const nlohmann::json trace = BuildTrace(run, nullptr);
  std::map<std::string, nlohmann::json> tracks;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "C") continue;
    EXPECT_EQ(e["ts"], 1000 * 1000);
    EXPECT_EQ(e["pid"], 0);
    tracks[e["name"]] = e["args"];
  }
  ASSERT_EQ(tracks.size(), 2u);
  EXPECT_EQ(tracks["memory"]["rss MiB"], 254.5);
  EXPECT_EQ(tracks["throughput"]["samples/s"], 9);
}

}  // namespace
}  // namespace dlaunch::launcher
