// The memory figures are one struct with one writer and one reader, shared by every file that
// carries them (events.jsonl telemetry lines, heartbeat.json, diagnosis.json): each round trip
// keeps all seven, and each file spells them with the same keys.
#include <fstream>

#include "core/run_dir/run_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/test_dir.h"

namespace dlaunch::rundir {
namespace {

using nlohmann::json;

const char* const kKeys[] = {
    "rss_bytes",         "peak_rss_bytes",    "device_allocated_bytes", "device_reserved_bytes",
    "device_peak_bytes", "device_free_bytes", "device_total_bytes"};

// Every figure distinct, so a swapped key would show.
MemoryFigures Distinct() {
  MemoryFigures m;
  m.rss_bytes = 100;
  m.peak_rss_bytes = 200;
  m.device_allocated_bytes = 300;
  m.device_reserved_bytes = 400;
  m.device_peak_bytes = 500;
  m.device_free_bytes = 600;
  m.device_total_bytes = 700;
  return m;
}

void ExpectAllKeys(const json& j) {
  for (const char* key : kKeys) EXPECT_TRUE(j.contains(key)) << key << " in " << j.dump();
}

TEST(MemoryFiguresTest, RoundTripWithAllSevenKeys) {
  const MemoryFigures m = Distinct();
  const json j = MemoryFiguresJson(m);
  ExpectAllKeys(j);
  EXPECT_EQ(j.size(), 7u);
  EXPECT_EQ(j["device_free_bytes"], 600);
  EXPECT_EQ(GetMemoryFigures(j), m);
  // Unknown figures are written too, as -1, so every file has the same set.
  const json unknown = MemoryFiguresJson(MemoryFigures{});
  ExpectAllKeys(unknown);
  EXPECT_EQ(unknown["device_total_bytes"], -1);
  EXPECT_EQ(GetMemoryFigures(unknown), MemoryFigures{});
}

TEST(MemoryFiguresTest, AbsentAndMistypedKeysAreUnknown) {
  // The Python agent leaves the device figures out off CUDA; a hand-edited file may hold anything.
  const MemoryFigures m = GetMemoryFigures(
      json{{"rss_bytes", 5}, {"peak_rss_bytes", "big"}, {"device_total_bytes", 7.0}});
  EXPECT_EQ(m.rss_bytes, 5);
  EXPECT_EQ(m.peak_rss_bytes, -1);
  EXPECT_EQ(m.device_allocated_bytes, -1);
  EXPECT_EQ(m.device_total_bytes, 7);
  EXPECT_EQ(GetMemoryFigures(json::array({1, 2})), MemoryFigures{});
  json into = {{"step", 3}};
  PutMemoryFigures(Distinct(), &into);
  EXPECT_EQ(into["step"], 3);
  EXPECT_EQ(GetMemoryFigures(into), Distinct());
}

TEST(MemoryFiguresTest, TelemetryLineRoundTripsThroughTheEventLog) {
  const testing::TestDir dir("run-dir");
  const std::string path = RankDir(dir.string()).events();
  TelemetrySample s;
  static_cast<MemoryFigures&>(s) = Distinct();
  s.step = 42;
  s.total_steps = 500;
  s.loss = 0.25;
  s.train_accuracy = 0.875;
  s.phase = "backward";
  s.samples_per_sec = 1234.5;
  s.step_ms = 12.5;
  s.compute_ms = 10;
  s.comm_wait_ms = 2.5;
  s.bytes_communicated = 1 << 20;
  const json body = TelemetryToJson(s);
  ExpectAllKeys(body);
  for (const char* key :
       {"step", "total_steps", "loss", "train_accuracy", "phase", "samples_per_sec", "step_ms",
        "compute_ms", "comm_wait_ms", "bytes_communicated"}) {
    EXPECT_TRUE(body.contains(key)) << key;
  }
  TelemetrySample unmeasured = s;
  unmeasured.train_accuracy = -1;
  EXPECT_FALSE(TelemetryToJson(unmeasured).contains("train_accuracy"));
  {
    EventLog log(path);
    log.Append(77, 3, "telemetry", body);
    log.Append(78, 3, "telemetry", TelemetryToJson(unmeasured));
  }
  EventsFile back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadEvents(path, "rank3/events.jsonl", &back, &problems), FileState::kOk);
  EXPECT_TRUE(problems.empty());
  ASSERT_EQ(back.telemetry.size(), 2u);
  const TelemetrySample& r = back.telemetry[0];
  EXPECT_EQ(r.unix_ms, 77);
  EXPECT_EQ(static_cast<const MemoryFigures&>(r), Distinct());
  EXPECT_EQ(r.step, 42);
  EXPECT_EQ(r.total_steps, 500);
  EXPECT_EQ(r.loss, 0.25);
  EXPECT_EQ(r.train_accuracy, 0.875);
  EXPECT_EQ(r.phase, "backward");
  EXPECT_EQ(r.samples_per_sec, 1234.5);
  EXPECT_EQ(r.step_ms, 12.5);
  EXPECT_EQ(r.compute_ms, 10);
  EXPECT_EQ(r.comm_wait_ms, 2.5);
  EXPECT_EQ(r.bytes_communicated, 1 << 20);
  EXPECT_EQ(back.telemetry[1].train_accuracy, -1);
  // The reader's output written again is the same body.
  EXPECT_EQ(TelemetryToJson(r), body);
}

TEST(MemoryFiguresTest, HeartbeatKeepsAllSeven) {
  const testing::TestDir dir("run-dir");
  const RankDir rank(dir.string());
  Heartbeat beat;
  beat.rank = 2;
  static_cast<MemoryFigures&>(beat) = Distinct();
  WriteHeartbeat(rank.heartbeat(), beat);
  std::ifstream in(rank.heartbeat());
  ExpectAllKeys(json::parse(in));
  Heartbeat back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadHeartbeat(rank.heartbeat(), "rank2/heartbeat.json", &back, &problems),
            FileState::kOk);
  EXPECT_EQ(static_cast<const MemoryFigures&>(back), Distinct());
  // The agent's form off CUDA: host figures only.
  std::ofstream(rank.heartbeat())
      << R"({"schema":"dlaunch.heartbeat/1","rss_bytes":9,"peak_rss_bytes":10})";
  ASSERT_EQ(ReadHeartbeat(rank.heartbeat(), "rank2/heartbeat.json", &back, &problems),
            FileState::kOk);
  EXPECT_EQ(back.rss_bytes, 9);
  EXPECT_EQ(back.peak_rss_bytes, 10);
  EXPECT_EQ(back.device_free_bytes, -1);
}

TEST(MemoryFiguresTest, DiagnosisRanksKeepAllSeven) {
  const testing::TestDir dir("run-dir");
  Diagnosis d;
  RankDiagnosis r;
  r.rank = 1;
  static_cast<MemoryFigures&>(r) = Distinct();
  d.ranks = {r, RankDiagnosis{}};
  const json j = DiagnosisToJson(d);
  ExpectAllKeys(j["ranks"][0]);
  ExpectAllKeys(j["ranks"][1]);
  const RunDir run(dir.string());
  WriteDiagnosis(run, d, "text\n");
  Diagnosis back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadDiagnosis(run.diagnosis_json(), "diagnosis.json", &back, &problems),
            FileState::kOk);
  ASSERT_EQ(back.ranks.size(), 2u);
  EXPECT_EQ(static_cast<const MemoryFigures&>(back.ranks[0]), Distinct());
  EXPECT_EQ(static_cast<const MemoryFigures&>(back.ranks[1]), MemoryFigures{});
}

}  // namespace
}  // namespace dlaunch::rundir
