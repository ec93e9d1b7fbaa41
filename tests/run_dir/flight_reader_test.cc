// The fast flight.json reader against the nlohmann one, and the bound on kept entries.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/run_dir/run_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/test_dir.h"

namespace dlaunch::rundir {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// What the nlohmann path makes of `text`: every entry through FlightEntryFromJson, sorted.
FlightDump ReadWithNlohmann(const std::string& text) {
  const json j = json::parse(text);
  FlightDump d;
  d.rank = std::clamp<int64_t>(j.value("rank", -1), -1, INT32_MAX);
  for (const json& e : j.at("entries")) {
    FlightEntry entry;
    if (FlightEntryFromJson(e, &entry)) d.entries.push_back(entry);
  }
  std::stable_sort(d.entries.begin(), d.entries.end(),
                   [](const FlightEntry& a, const FlightEntry& b) { return a.seq < b.seq; });
  return d;
}

std::string EntriesJson(const FlightDump& d) {
  FlightDump only = d;
  only.process_groups.clear();
  only.rank = only.world_size = 0;
  only.backend = only.reason = "";
  only.dumped_unix_ms = only.capacity = 0;
  return FlightToJson(only);
}

TEST(FlightReaderTest, WriterToReaderRoundTripsThousandsOfEntries) {
  const testing::TestDir dir("flight-reader");
  FlightDump dump;
  dump.rank = 5;
  dump.world_size = 4096;
  dump.backend = "nccl";
  dump.reason = "timeout";
  dump.dumped_unix_ms = 1796130000123;
  dump.capacity = 2000;
  dump.process_groups["0"] = {{0, 1, 2, 3}, "nccl", "default_pg"};
  for (int64_t seq = 0; seq < 2000; ++seq) {
    FlightEntry& e = dump.entries.emplace_back();
    e.seq = seq;
    e.collective_seq = seq;
    e.op = seq % 7 == 0 ? "broadcast" : "allreduce";
    e.dtype = "bfloat16";
    e.count = 1 << 18;
    e.bytes = 1 << 19;
    e.root = seq % 7 == 0 ? 2 : -1;
    e.state = seq < 1999 ? OpState::kCompleted : OpState::kStarted;
    e.scheduled_unix_ns = 1796130000000000000 + seq * 50000000;
    e.started_unix_ns = e.scheduled_unix_ns + 1000;
    e.completed_unix_ns = seq < 1999 ? e.started_unix_ns + 20000000 : 0;
    e.duration_us = seq < 1999 ? 20000 : 0;
    e.pg = "0";
    e.pg_seq = seq;
    e.shape = {512, 512};
    e.call_site = "train.py:88 train_step \u00e9";  // beyond the short-string size, and UTF-8
    e.bucket = seq % 3 == 0 ? static_cast<int>(seq % 5) : -1;
    if (seq == 17) e.error = "aborted: \"timeout\"\n";
  }
  const std::string path = RankDir(dir.string()).flight();
  WriteFlight(path, dump);
  FlightDump back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadFlight(path, "rank5/flight.json", &back, &problems), FileState::kOk);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(FlightToJson(back), FlightToJson(dump));
  EXPECT_EQ(back.dropped_entries, 0);
}

// Odd values a hand-written or foreign recorder may leave: each is read as the nlohmann path reads
// it (the fast reader must not be stricter or looser about a single field).
TEST(FlightReaderTest, OddValuesReadAsTheNlohmannPathReadsThem) {
  const testing::TestDir dir("flight-reader");
  const std::string text = R"({"schema":"dlaunch.flight/1","rank":3,"entries":[
    {"seq":4.0,"op":"allreduce","count":"12","bytes":1e3,"peer":-7,"root":3000000000,
     "state":"started","shape":[1,"x",2.5,-3,18446744073709551615],"pg":0,"bucket":null},
    {"seq":9223372036854775808,"op":"send"},
    {"seq":"1","op":"recv"},
    {"op":"barrier"},
    7, "x", null,
    {"seq":2,"seq":3,"op":"broadcast","op":"barrier","state":"completed","call_site":"a\u0000b"},
    {"seq":1,"duration_us":1e300,"started_unix_ns":-5,"dtype":["float"],"error":{"a":1}}
  ]})";
  const std::string path = dir.string() + "/flight.json";
  std::ofstream(path) << text;
  FlightDump back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadFlight(path, "rank3/flight.json", &back, &problems), FileState::kOk);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(EntriesJson(back), EntriesJson(ReadWithNlohmann(text)));
  ASSERT_NE(back.Find(3), nullptr);
  EXPECT_EQ(back.Find(3)->op, "barrier");  // a repeated key: the last value
}

TEST(FlightReaderTest, FilesTheFastPathDeclinesStillReadAsBefore) {
  const testing::TestDir dir("flight-reader");
  const std::string path = dir.string() + "/flight.json";
  std::vector<std::string> problems;
  FlightDump back;
  // A newer version: read, with a problem line.
  std::ofstream(path) << R"({"schema":"dlaunch.flight/7","entries":[{"seq":1}]})";
  EXPECT_EQ(ReadFlight(path, "rank0/flight.json", &back, &problems), FileState::kOk);
  EXPECT_EQ(back.entries.size(), 1u);
  // Trailing bytes after the object, or not an object: not valid JSON.
  std::ofstream(path) << R"({"entries":[{"seq":1}]} x)";
  EXPECT_EQ(ReadFlight(path, "rank0/flight.json", &back, &problems), FileState::kInvalid);
  std::ofstream(path) << "[1,2]";
  EXPECT_EQ(ReadFlight(path, "rank0/flight.json", &back, &problems), FileState::kInvalid);
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_THAT(problems[0], HasSubstr("newer than this dlaunch reads"));
  EXPECT_THAT(problems[1], HasSubstr("is not valid JSON"));
  EXPECT_THAT(problems[2], HasSubstr("is not valid JSON"));
}

TEST(FlightReaderTest, KeepsTheNewestEntriesBySeqWhateverTheirOrder) {
  const testing::TestDir dir("flight-reader");
  FlightDump dump;
  for (int64_t seq = 0; seq < 500; ++seq) {
    FlightEntry& e = dump.entries.emplace_back();
    e.seq = seq;
    e.op = "allreduce";
    e.state = OpState::kCompleted;
  }
  std::shuffle(dump.entries.begin(), dump.entries.end(), std::mt19937(7));
  const std::string path = dir.string() + "/flight.json";
  WriteFlight(path, dump);
  FlightDump back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadFlight(path, "rank0/flight.json", &back, &problems, 100), FileState::kOk);
  ASSERT_EQ(back.entries.size(), 100u);
  EXPECT_EQ(back.dropped_entries, 400);
  for (size_t i = 0; i < back.entries.size(); ++i) EXPECT_EQ(back.entries[i].seq, 400 + i);
  EXPECT_EQ(back.LastCompletedSeq(), 499);  // the older ones fell out, as from a ring
}

TEST(FlightReaderTest, BudgetPerRankShrinksWithTheWorld) {
  EXPECT_EQ(FlightEntriesKept(1), kMaxFlightEntries);
  EXPECT_EQ(FlightEntriesKept(4096), 244u);
  EXPECT_EQ(FlightEntriesKept(65536), static_cast<size_t>(kMinFlightEntriesKept));
}

void WriteRank(const std::string& run, int rank, int64_t first, int64_t last) {
  std::filesystem::create_directories(RunDir(run).rank(rank).path());
  FlightDump d;
  d.rank = rank;
  d.world_size = 2;
  for (int64_t seq = first; seq <= last; ++seq) {
    FlightEntry& e = d.entries.emplace_back();
    e.seq = seq;
    e.op = "allreduce";
    e.state = seq < last ? OpState::kCompleted : OpState::kStarted;
  }
  WriteFlight(RunDir(run).rank(rank).flight(), d);
}

TEST(FlightReaderTest, DroppedEntriesAreAProblemOnlyWhenRecordsStopOverlapping) {
  const testing::TestDir dir("flight-reader");
  WriteRank(dir.string(), 0, 0, 199);
  WriteRank(dir.string(), 1, 100, 199);
  RunFiles run = ReadRunDir(dir.string(), 0, /*flight_entry_budget=*/2 * 80);
  ASSERT_EQ(run.ranks.size(), 2u);
  EXPECT_EQ(run.ranks[0].flight.entries.size(), 80u);
  EXPECT_EQ(run.ranks[0].flight.entries.front().seq, 120);
  for (const std::string& p : run.problems)
    EXPECT_THAT(p, ::testing::Not(HasSubstr("flight records")));
  // Rank 1 far behind: its newest entry is older than what rank 0 kept.
  WriteRank(dir.string(), 1, 0, 9);
  run = ReadRunDir(dir.string(), 0, 2 * 80);
  EXPECT_THAT(run.problems, ::testing::Contains(HasSubstr(
                                "flight records: only the newest 80 entries of each of 2 ranks")));
}

}  // namespace
}  // namespace dlaunch::rundir
