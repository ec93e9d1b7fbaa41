// One round trip per file of the run directory: what a writer writes, its reader reads back.
#include "core/run_dir/run_dir.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/test_dir.h"

namespace dlaunch::rundir {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(PathsTest, EveryFileHasOnePath) {
  RunDir run("/logs/run");
  EXPECT_EQ(run.summary(), "/logs/run/summary.json");
  EXPECT_EQ(run.node_summary(2), "/logs/run/summary.node2.json");
  EXPECT_EQ(run.preflight(), "/logs/run/preflight.json");
  EXPECT_EQ(run.diagnosis_text(), "/logs/run/diagnosis.txt");
  EXPECT_EQ(run.diagnosis_json(), "/logs/run/diagnosis.json");
  EXPECT_EQ(run.trace(), "/logs/run/trace.json");
  RankDir rank = run.rank(3);
  EXPECT_EQ(rank.path(), "/logs/run/rank3");
  EXPECT_EQ(rank.stdout_log(), "/logs/run/rank3/stdout.log");
  EXPECT_EQ(rank.stderr_log(), "/logs/run/rank3/stderr.log");
  EXPECT_EQ(rank.events(), "/logs/run/rank3/events.jsonl");
  EXPECT_EQ(rank.flight(), "/logs/run/rank3/flight.json");
  EXPECT_EQ(rank.hang_test_flight(), "/logs/run/rank3/flight-hang-test.json");
  EXPECT_EQ(rank.error(), "/logs/run/rank3/error.json");
  EXPECT_EQ(rank.stacks(), "/logs/run/rank3/stacks.txt");
  EXPECT_EQ(rank.nccl_log(), "/logs/run/rank3/nccl.log");
  EXPECT_EQ(rank.torch_error(), "/logs/run/rank3/torch_error.json");
  EXPECT_EQ(rank.heartbeat(), "/logs/run/rank3/heartbeat.json");
  EXPECT_EQ(rank.dump_request(), "/logs/run/rank3/dump_request");
  EXPECT_EQ(rank.py_stacks(), "/logs/run/rank3/py_stacks.txt");
  EXPECT_EQ(rank.torch_trace_prefix(), "/logs/run/rank3/torch_trace_");
  EXPECT_EQ(rank.op_table("all_reduce_perf"), "/logs/run/rank3/all_reduce_perf.txt");
  EXPECT_EQ(RankFileLabel(3, rank.flight()), "rank3/flight.json");
  EXPECT_EQ(RunDir::ParseRankDirName("rank12"), 12);
  EXPECT_EQ(RunDir::ParseRankDirName("rank"), std::nullopt);
  EXPECT_EQ(RunDir::ParseRankDirName("rank-1"), std::nullopt);
  EXPECT_EQ(RunDir::ParseRankDirName("rank100000000"), std::nullopt);
  EXPECT_EQ(RunDir::ParseRankDirName("rank2147483647"), std::nullopt);
  EXPECT_TRUE(RankDir::IsNcclLog("nccl.log"));
  EXPECT_TRUE(RankDir::IsNcclLog("nccl.host.123.log"));
  EXPECT_FALSE(RankDir::IsNcclLog("stderr.log"));
}

TEST(SchemaTest, OldFilesAreVersionOneOtherFilesAreRefused) {
  std::string problem;
  EXPECT_EQ(CheckSchema(json::object(), "flight", &problem), SchemaMatch::kSame);
  EXPECT_EQ(CheckSchema({{"schema", "dlaunch.flight/1"}}, "flight", &problem), SchemaMatch::kSame);
  EXPECT_EQ(CheckSchema({{"schema", "dlaunch.flight/2"}}, "flight", &problem), SchemaMatch::kNewer);
  EXPECT_THAT(problem, HasSubstr("newer"));
  EXPECT_EQ(CheckSchema({{"schema", "dlaunch.summary/1"}}, "flight", &problem),
            SchemaMatch::kOther);
  EXPECT_EQ(CheckSchema({{"schema", 7}}, "flight", &problem), SchemaMatch::kOther);
  EXPECT_EQ(CheckSchema({{"schema", "dlaunch.flight/x"}}, "flight", &problem), SchemaMatch::kOther);
  EXPECT_EQ(SchemaId("events"), "dlaunch.events/1");
}

TEST(OpTableTest, RoundTripLaterVersionAndOtherFiles) {
  const testing::TestDir dir("run-dir");
  const std::string path = dir.path() / "all_reduce_perf.txt";
  const std::string table =
      "# Collective test starting: all_reduce_perf\n# Avg bus bandwidth : 1\n";
  WriteOpTable(path, table);
  EXPECT_EQ("# schema: dlaunch.op_table/1\n" + table, Slurp(path));
  std::string back;
  std::vector<std::string> problems;
  EXPECT_EQ(FileState::kOk, ReadOpTable(path, "t", &back, &problems));
  EXPECT_EQ(table, back);
  EXPECT_TRUE(problems.empty());
  std::ofstream(path) << "# schema: dlaunch.op_table/2\n" << table;
  EXPECT_EQ(FileState::kOk, ReadOpTable(path, "t", &back, &problems));
  EXPECT_EQ(table, back);
  EXPECT_THAT(problems, ElementsAre(HasSubstr("dlaunch.op_table/2 is newer")));
  problems.clear();
  std::ofstream(path) << table;  // nccl-tests' own output: not a dlaunch file
  EXPECT_EQ(FileState::kInvalid, ReadOpTable(path, "t", &back, &problems));
  EXPECT_THAT(problems, ElementsAre(HasSubstr("not a dlaunch op table")));
  EXPECT_EQ(FileState::kAbsent, ReadOpTable(path + ".none", "t", &back, &problems));
}

TEST(FlightFileTest, RoundTrip) {
  const testing::TestDir dir("run-dir");
  FlightDump dump;
  dump.rank = 2;
  dump.world_size = 4;
  dump.backend = "gloo";
  dump.reason = "request";
  dump.dumped_unix_ms = 1764450312500;
  dump.capacity = 2000;
  for (int64_t seq = 0; seq < 3; ++seq) {
    FlightEntry& e = dump.entries.emplace_back();
    e.seq = seq;
    e.collective_seq = seq == 1 ? -1 : seq - (seq > 1);
    e.op = seq == 1 ? "send" : "allreduce";
    e.dtype = "float";
    e.count = 1 << 20;
    e.bytes = 4 << 20;
    e.peer = seq == 1 ? 3 : -1;
    e.state = seq < 2 ? OpState::kCompleted : OpState::kStarted;
    e.scheduled_unix_ns = 1764450000000000000 + seq;
    e.started_unix_ns = e.scheduled_unix_ns + 10;
    e.completed_unix_ns = seq < 2 ? e.started_unix_ns + 50 : 0;
    e.duration_us = seq < 2 ? 1 : 0;
  }
  dump.entries[0].error = "";
  // What Python ranks add: process groups, and per call its group, shape, call site and bucket.
  dump.process_groups["0"] = {{0, 1, 2, 3}, "gloo", ""};
  dump.process_groups["1"] = {{1, 3}, "gloo", "mesh_tp"};
  dump.entries[2].pg = "0";
  dump.entries[2].pg_seq = 1;
  dump.entries[2].shape = {1024, 1024};
  dump.entries[2].call_site = "DDP bucket 0 of train.py:30 <module>";
  dump.entries[2].bucket = 0;
  const std::string path = RankDir(dir.string()).flight();
  WriteFlight(path, dump);
  EXPECT_THAT(Slurp(path), HasSubstr("\"schema\":\"dlaunch.flight/1\""));
  FlightDump back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadFlight(path, "rank2/flight.json", &back, &problems), FileState::kOk);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(FlightToJson(back), FlightToJson(dump));
  EXPECT_EQ(back.LastCompletedSeq(), 1);
  EXPECT_EQ(back.LastStartedSeq(), 2);
  ASSERT_NE(back.Find(1), nullptr);
  EXPECT_EQ(back.Find(1)->peer, 3);
  EXPECT_EQ(back.Find(7), nullptr);
  EXPECT_EQ(back.Find(2)->call_site, "DDP bucket 0 of train.py:30 <module>");
  EXPECT_THAT(back.Find(2)->shape, ElementsAre(1024, 1024));
  EXPECT_EQ(back.Find(2)->bucket, 0);
  EXPECT_EQ(back.Find(0)->pg_seq, -1);
  EXPECT_THAT(back.process_groups.at("1").ranks, ElementsAre(1, 3));
  EXPECT_EQ(back.process_groups.at("1").desc, "mesh_tp");
  EXPECT_THAT(Slurp(path), Not(HasSubstr("\"desc\":\"\"")));  // a group without one
  // A native entry keeps its fields only.
  EXPECT_THAT(Slurp(path), Not(HasSubstr("\"bucket\":-1")));
  EXPECT_TRUE(IsPointToPoint("recv"));
  EXPECT_EQ(ParseOpState("bogus"), OpState::kScheduled);
}

TEST(FlightFileTest, BrokenFilesAreProblemsNotErrors) {
  const testing::TestDir dir("run-dir");
  const std::string path = dir.string() + "/flight.json";
  std::vector<std::string> problems;
  FlightDump back;
  EXPECT_EQ(ReadFlight(path, "rank0/flight.json", &back, &problems), FileState::kAbsent);
  EXPECT_TRUE(problems.empty());
  std::ofstream(path) << R"({"rank": 0, "entries": [{"seq": 1, "st)";
  EXPECT_EQ(ReadFlight(path, "rank0/flight.json", &back, &problems), FileState::kInvalid);
  std::ofstream(path) << R"({"rank": 0})";
  EXPECT_EQ(ReadFlight(path, "rank0/flight.json", &back, &problems), FileState::kInvalid);
  std::ofstream(path) << R"({"schema": "dlaunch.summary/1", "entries": []})";
  EXPECT_EQ(ReadFlight(path, "rank0/flight.json", &back, &problems), FileState::kInvalid);
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_THAT(problems[0], HasSubstr("rank0/flight.json is not valid JSON"));
  EXPECT_THAT(problems[1], HasSubstr("rank0/flight.json has no entries array"));
  EXPECT_THAT(problems[2], HasSubstr("not dlaunch.flight/1"));
}

TEST(EventsFileTest, RoundTripThroughTheAppendOnlyLog) {
  const testing::TestDir dir("run-dir");
  const std::string path = RankDir(dir.string()).events();
  {
    EventLog log(path);
    log.Append(100, 1, "telemetry",
               {{"step", 4}, {"phase", "forward"}, {"rss_bytes", 800}, {"device_total_bytes", 9}});
    log.Append(200, 1, "timeout", {{"seq", 5}, {"missing_ranks", {2}}, {"message", "late"}});
    log.Append(1, "checkpoint", {{"step", 4}});
  }
  EXPECT_THAT(Slurp(path), HasSubstr("\"schema\":\"dlaunch.events/1\""));
  EventsFile back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadEvents(path, "rank1/events.jsonl", &back, &problems), FileState::kOk);
  EXPECT_TRUE(problems.empty());
  ASSERT_EQ(back.telemetry.size(), 1u);
  EXPECT_EQ(back.telemetry[0].unix_ms, 100);
  EXPECT_EQ(back.telemetry[0].step, 4);
  EXPECT_EQ(back.telemetry[0].phase, "forward");
  EXPECT_EQ(back.telemetry[0].rss_bytes, 800);
  EXPECT_EQ(back.telemetry[0].device_total_bytes, 9);
  EXPECT_EQ(back.telemetry[0].device_free_bytes, -1);
  ASSERT_EQ(back.events.size(), 2u);
  EXPECT_EQ(back.events[0].type(), EventKind::kTimeout);
  EXPECT_EQ(back.events[0].rank, 1);
  EXPECT_EQ(back.events[0].body["missing_ranks"], json::array({2}));
  EXPECT_EQ(back.events[1].type(), EventKind::kOther);
  EXPECT_EQ(back.events[1].kind, "checkpoint");
  EXPECT_GT(back.events[1].unix_ms, 1700000000000);
}

TEST(EventsFileTest, OldLinesAndGarbage) {
  const testing::TestDir dir("run-dir");
  const std::string path = dir.string() + "/events.jsonl";
  std::ofstream(path) << R"({"unix_ms": 5, "rank": 0, "kind": "oom", "message": "m"})"
                      << "\n"
                      << "\x01garbage\n\n"
                      << R"({"schema": "dlaunch.events/9", "unix_ms": 6, "kind": "error"})"
                      << "\n";
  EventsFile back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadEvents(path, "rank0/events.jsonl", &back, &problems), FileState::kOk);
  ASSERT_EQ(back.events.size(), 2u);
  EXPECT_EQ(back.events[0].type(), EventKind::kOom);
  EXPECT_EQ(back.events[1].type(), EventKind::kError);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_THAT(problems[0], HasSubstr("newer"));
  EXPECT_THAT(problems[1], HasSubstr("rank0/events.jsonl: 1 unreadable line"));
}

TEST(HeartbeatFileTest, RoundTripAndTheAgentsForm) {
  const testing::TestDir dir("run-dir");
  const RankDir rank(dir.string());
  Heartbeat beat;
  std::vector<std::string> problems;
  EXPECT_EQ(ReadHeartbeat(rank.heartbeat(), "rank1/heartbeat.json", &beat, &problems),
            FileState::kAbsent);
  beat.rank = 1;
  beat.pid = 42;
  beat.unix_ms = 5;
  beat.step = 7;
  beat.phase = "backward";
  beat.last_started_seq = 9;
  beat.last_completed_seq = 8;
  beat.current_op = "allreduce";
  beat.device_reserved_bytes = 800;
  beat.section = "checkpoint";
  beat.section_since_unix_ms = 3;
  beat.section_timeout_s = 900;
  WriteHeartbeat(rank.heartbeat(), beat);
  Heartbeat back;
  ASSERT_EQ(ReadHeartbeat(rank.heartbeat(), "rank1/heartbeat.json", &back, &problems),
            FileState::kOk);
  EXPECT_EQ(back.pid, 42);
  EXPECT_EQ(back.phase, "backward");
  EXPECT_EQ(back.last_started_seq, 9);
  EXPECT_EQ(back.device_reserved_bytes, 800);
  EXPECT_EQ(back.device_allocated_bytes, -1);
  EXPECT_EQ(back.section, "checkpoint");
  EXPECT_EQ(back.section_timeout_s, 900);
  // The agent's section without a timeout (None): the job's --hang-timeout.
  std::ofstream(rank.heartbeat())
      << R"({"schema":"dlaunch.heartbeat/1","pid":7,"section":{"name":"eval","timeout_s":null}})";
  ASSERT_EQ(ReadHeartbeat(rank.heartbeat(), "rank1/heartbeat.json", &back, &problems),
            FileState::kOk);
  EXPECT_EQ(back.section, "eval");
  EXPECT_EQ(back.section_timeout_s, -1);
  std::ofstream(rank.heartbeat()) << R"({"schema":"dlaunch.flight/1"})";
  EXPECT_EQ(ReadHeartbeat(rank.heartbeat(), "rank1/heartbeat.json", &back, &problems),
            FileState::kInvalid);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("rank1/heartbeat.json has schema"));

  WriteDumpRequest(rank.dump_request(), "hang", 11);
  EXPECT_THAT(Slurp(rank.dump_request()), HasSubstr("\"schema\":\"dlaunch.dump_request/1\""));
}

TEST(ErrorFileTest, RoundTrip) {
  const testing::TestDir dir("run-dir");
  const std::string path = RankDir(dir.string()).error();
  ErrorReport report{1,
                     "oom",
                     "out of memory in forward",
                     1764450001800,
                     {{"tried_to_allocate_bytes", 1 << 30}, {"advice", {"lower --batch-size"}}}};
  WriteError(path, report);
  ErrorReport back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadError(path, "rank1/error.json", &back, &problems), FileState::kOk);
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.kind, "oom");
  EXPECT_EQ(back.message, "out of memory in forward");
  EXPECT_EQ(back.unix_ms, 1764450001800);
  EXPECT_EQ(back.fields["tried_to_allocate_bytes"], 1 << 30);
  EXPECT_EQ(back.fields["schema"], "dlaunch.error/1");
  WriteError(path, back);  // the fields it read back write the same file again
  ErrorReport again;
  ASSERT_EQ(ReadError(path, "rank1/error.json", &again, &problems), FileState::kOk);
  EXPECT_EQ(again.fields, back.fields);
}

TEST(SummaryFileTest, RoundTrip) {
  const testing::TestDir dir("run-dir");
  Summary s;
  s.run_id = "r1";
  s.host = "node0";
  s.exit_code = 1;
  s.restarts = 2;
  s.updated_unix_ms = 77;
  s.error = "rank 1 failed";
  SummaryRank local;
  local.rank = 0;
  local.local_rank = 0;
  local.host = "node0";
  local.pid = 100;
  local.status = RankStatus::kKilled;
  local.start_unix_ms = 10;
  local.end_unix_ms = 20;
  local.restarts = 2;
  local.exit_code = -15;
  local.signal = 15;
  local.stopped_at_teardown = true;
  SummaryRank remote;
  remote.rank = 1;
  remote.node_rank = 1;
  remote.host = "node1";
  remote.pid = 200;
  remote.status = RankStatus::kLost;
  s.ranks = {local, remote};
  s.nodes = {{0, "node0", RankStatus::kFailed, 1, ""}, {1, "node1", RankStatus::kLost, {}, "gone"}};
  const std::string path = RunDir(dir.string()).summary();
  WriteSummary(path, s);
  const json written = json::parse(Slurp(path));
  EXPECT_EQ(written["ranks"][0]["signal"], "SIGTERM");
  EXPECT_FALSE(written["ranks"][1].contains("exit_code"));
  EXPECT_EQ(written["ranks"][0]["stopped_at_teardown"], true);
  EXPECT_FALSE(written["ranks"][1].contains("stopped_at_teardown"));
  Summary back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadSummary(path, "summary.json", &back, &problems), FileState::kOk);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(SummaryToJson(back), SummaryToJson(s));
  EXPECT_EQ(back.ranks[0].signal, 15);
  EXPECT_TRUE(back.ranks[0].stopped_at_teardown);
  EXPECT_EQ(back.ranks[1].node_rank, 1);
  EXPECT_EQ(back.ranks[1].local_rank, std::nullopt);
  EXPECT_EQ(back.nodes[1].error, "gone");

  s.exit_code.reset();  // while running: null
  WriteSummary(path, s);
  ASSERT_EQ(ReadSummary(path, "summary.json", &back, &problems), FileState::kOk);
  EXPECT_EQ(back.exit_code, std::nullopt);
}

TEST(ReportFilesTest, PreflightAndTraceRoundTrip) {
  const testing::TestDir dir("run-dir");
  const RunDir run(dir.string());
  WritePreflight(run.preflight(), {{"verdict", "FAIL"},
                                   {"reasons", {"rank 1: slow"}},
                                   {"world_size", 2},
                                   {"backend", "gloo"},
                                   {"unix_ms", 5},
                                   {"bandwidth", json::array()}});
  PreflightReport report;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadPreflight(run.preflight(), "preflight.json", &report, &problems), FileState::kOk);
  EXPECT_EQ(report.verdict, "FAIL");
  EXPECT_THAT(report.reasons, ElementsAre("rank 1: slow"));
  EXPECT_EQ(report.world_size, 2);
  EXPECT_EQ(report.backend, "gloo");
  EXPECT_EQ(report.unix_ms, 5);
  EXPECT_EQ(report.document["schema"], "dlaunch.preflight/1");
  EXPECT_TRUE(report.document["bandwidth"].is_array());

  json trace = {{"traceEvents", json::array({{{"ph", "i"}, {"name", "x"}}})},
                {"displayTimeUnit", "ms"}};
  WriteTrace(run.trace(), trace);
  json back;
  ASSERT_EQ(ReadTrace(run.trace(), "trace.json", &back, &problems), FileState::kOk);
  EXPECT_EQ(back["schema"], "dlaunch.trace/1");
  back.erase("schema");
  EXPECT_EQ(back, trace);
  EXPECT_TRUE(problems.empty());
}

TEST(DiagnosisFileTest, RoundTrip) {
  const testing::TestDir dir("run-dir");
  Diagnosis d;
  d.kind = DiagnosisKind::kMismatch;
  d.hang_kind = HangKind::kNone;
  d.mismatch = MismatchKind::kDtype;
  d.headline = "MISMATCH at collective #5";
  d.trigger = "t";
  d.culprit_ranks = {2};
  d.seq = 5;
  d.op = "allreduce";
  d.dtype = "float";
  d.count = 10;
  d.bytes = 40;
  d.entered_ranks = {0, 1, 2};
  d.missing_ranks = {3};
  d.pg = "2";
  d.pg_desc = "mesh_tp";
  d.pg_ranks = {2, 3};
  d.pg_seq = 133;
  d.details = {"  #5 rank 2: allreduce double"};
  d.problems = {"rank3/ missing"};
  d.run_dir = dir.string();
  d.created_unix_ms = 9;
  RankDiagnosis r;
  r.rank = 2;
  r.culprit = true;
  r.state = RankState::kWaiting;
  r.stopped = true;
  r.waiting_ms = 310000;
  r.exit_code = -15;
  r.signal = 15;
  r.nccl_warnings = {"WARN x"};
  r.line = "rank 2 [culprit]: waiting in #5";
  d.ranks = {r};
  EXPECT_EQ(r.StateText(), "waiting,stopped");
  const RunDir run(dir.string());
  WriteDiagnosis(run, d, "text\n");
  EXPECT_EQ(Slurp(run.diagnosis_text()), "text\n");
  Diagnosis back;
  std::vector<std::string> problems;
  ASSERT_EQ(ReadDiagnosis(run.diagnosis_json(), "diagnosis.json", &back, &problems),
            FileState::kOk);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(DiagnosisToJson(back), DiagnosisToJson(d));
  EXPECT_EQ(back.ranks[0].state, RankState::kWaiting);
  EXPECT_EQ(back.pg, "2");
  EXPECT_EQ(back.pg_desc, "mesh_tp");
  EXPECT_THAT(back.pg_ranks, ElementsAre(2, 3));
  EXPECT_EQ(back.pg_seq, 133);
  // A file from before the group fields: matched by seq.
  nlohmann::json old = DiagnosisToJson(d);
  for (const char* field : {"pg", "pg_desc", "pg_ranks", "pg_seq"}) old.erase(field);
  const Diagnosis earlier = DiagnosisFromJson(old);
  EXPECT_EQ(earlier.pg, "");
  EXPECT_TRUE(earlier.pg_ranks.empty());
  EXPECT_EQ(earlier.pg_seq, -1);
  EXPECT_TRUE(back.ranks[0].stopped);
  EXPECT_EQ(DiagnosisToJson(d)["mismatch_type"], "COLLECTIVE_DTYPE_MISMATCH");
  for (RankState s : {RankState::kUnknown, RankState::kRunning, RankState::kWaiting,
                      RankState::kNeverEntered, RankState::kCompleted, RankState::kExited,
                      RankState::kFailed, RankState::kStopped, RankState::kUnresponsive}) {
    EXPECT_EQ(ParseRankState(RankStateName(s)), s);
  }
  for (HangKind k : {HangKind::kNone, HangKind::kInCollective, HangKind::kBetweenCollectives,
                     HangKind::kBeforeFirst, HangKind::kNoFlightRecorder}) {
    EXPECT_EQ(ParseHangKind(HangKindName(k)), k);
  }
}

TEST(RankLogsTest, StacksTailsAndNcclWarnings) {
  const testing::TestDir dir("run-dir");
  const RankDir rank(dir.string());
  WriteStacks(rank.stacks(), "Thread 1 (LWP 5):\n#0 0x1 in poll ()\n");
  EXPECT_EQ(ReadStacks(rank.stacks()), "Thread 1 (LWP 5):\n#0 0x1 in poll ()\n");
  EXPECT_EQ(ReadStacks(rank.path() + "/none"), "");
  std::ofstream(rank.stderr_log()) << "a\n\nb\nc\n";
  EXPECT_THAT(ReadLogTail(rank.stderr_log(), 2), ElementsAre("b", "c"));
  std::ofstream(rank.nccl_log()) << "node0:1:1 [0] NCCL INFO ok\nnode0:1:1 [0] NCCL WARN bad\n";
  EXPECT_THAT(ReadNcclWarnings(rank), ElementsAre("node0:1:1 [0] NCCL WARN bad"));
}

TEST(RunReaderTest, ReadsWhatTheWritersWrote) {
  const testing::TestDir dir("run-dir");
  const RunDir run(dir.string());
  for (int r = 0; r < 2; ++r) fs::create_directories(run.rank(r).path());
  Summary s;
  s.run_id = "r";
  s.exit_code = 0;
  for (int r = 0; r < 2; ++r) {
    SummaryRank sr;
    sr.rank = r;
    sr.status = RankStatus::kOk;
    sr.exit_code = 0;
    s.ranks.push_back(sr);
  }
  WriteSummary(run.summary(), s);
  FlightDump dump;
  dump.rank = 1;
  dump.world_size = 3;  // a third rank whose folder is gone
  WriteFlight(run.rank(1).flight(), dump);
  RunFiles files = ReadRunDir(dir.string());
  EXPECT_EQ(files.world_size, 3);
  ASSERT_TRUE(files.summary.has_value());
  EXPECT_EQ(files.summary->run_id, "r");
  EXPECT_EQ(files.ranks[1].flight_state, FileState::kOk);
  EXPECT_EQ(files.ranks[0].flight_state, FileState::kAbsent);
  EXPECT_FALSE(files.ranks[2].dir_present);
  EXPECT_THAT(files.problems, ElementsAre("rank2/ missing"));
}

TEST(RunReaderTest, TakesTheHeartbeatsOwnTimeNotTheFiles) {
  const testing::TestDir dir("run-dir");
  const RankDir rank(dir.string() + "/rank0");
  fs::create_directories(rank.path());
  Heartbeat beat;
  beat.rank = 0;
  beat.unix_ms = 1764450005500;
  WriteHeartbeat(rank.heartbeat(), beat);
  // As after `cp -r` an hour later: the file's time says nothing of the rank.
  fs::last_write_time(rank.heartbeat(), fs::file_time_type::clock::now() + std::chrono::hours(1));
  std::vector<std::string> problems;
  EXPECT_EQ(ReadRankFiles(rank, 0, &problems).heartbeat_unix_ms, 1764450005500);
  // The agent's channel, damaged: no time, and no missing evidence either.
  std::ofstream(rank.heartbeat()) << "{\"schema\":";
  EXPECT_EQ(ReadRankFiles(rank, 0, &problems).heartbeat_unix_ms, 0);
  EXPECT_THAT(problems, ::testing::IsEmpty());
}

}  // namespace
}  // namespace dlaunch::rundir
