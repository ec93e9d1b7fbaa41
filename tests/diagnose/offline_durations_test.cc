// Offline durations come from the records' own timestamps: a run directory copied (`cp -r` resets
// every file's time) or read long after the run gives the same "waiting N" and "last output N ago"
// as the run itself, and a SIGKILLed launcher's ranks are not all "last output 0 ms ago".
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/run_dir/run_dir.h"
#include "launcher/diagnose/analyzer.h"
#include "launcher/diagnose/diagnose_command.h"
#include "launcher/diagnose/run_snapshot.h"
#include "tests/diagnose/test_util.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kT0 = 1764450000000;  // when the ranks entered collective #5
constexpr int64_t kFound = kT0 + 5500;  // when the launcher found the hang and dumped

rundir::FlightEntry Allreduce(int64_t seq, rundir::OpState state, int64_t started_ms) {
  rundir::FlightEntry e;
  e.seq = e.collective_seq = seq;
  e.op = "allreduce";
  e.dtype = "float";
  e.count = 1024;
  e.bytes = 4096;
  e.state = state;
  e.scheduled_unix_ns = e.started_unix_ns = started_ms * 1000000;
  if (state == rundir::OpState::kCompleted) e.completed_unix_ns = (started_ms + 10) * 1000000;
  return e;
}

// Ranks 0 and 1 entered #5 at kT0; rank 2 completed #4 and never entered #5. The launcher found
// the hang at kFound: the flight dumps, diagnosis.json and the teardown all say so.
void WriteHungRun(const std::string& dir) {
  const rundir::RunDir run(dir);
  rundir::Summary summary;
  summary.run_id = "hang";
  summary.exit_code = 3;
  summary.updated_unix_ms = kFound;
  for (int r = 0; r < 3; ++r) {
    const rundir::RankDir rank = run.rank(r);
    fs::create_directories(rank.path());
    rundir::FlightDump dump;
    dump.rank = r;
    dump.world_size = 3;
    dump.backend = "gloo";
    dump.reason = "request";
    dump.dumped_unix_ms = kFound;
    for (int64_t seq = 0; seq < 5; ++seq) {
      dump.entries.push_back(Allreduce(seq, rundir::OpState::kCompleted, kT0 - 500 + seq * 20));
    }
    if (r != 2) dump.entries.push_back(Allreduce(5, rundir::OpState::kStarted, kT0));
    rundir::WriteFlight(rank.flight(), dump);
    std::ofstream(rank.stdout_log()) << "step 4\n";
    std::ofstream(rank.stderr_log()) << "terminated\n";
    rundir::SummaryRank s;
    s.rank = r;
    s.local_rank = r;
    s.host = "node0";
    s.status = rundir::RankStatus::kKilled;
    s.exit_code = -15;
    s.signal = 15;
    s.end_unix_ms = kFound;
    summary.ranks.push_back(s);
  }
  rundir::WriteSummary(run.summary(), summary);
  rundir::Diagnosis found;
  found.kind = rundir::DiagnosisKind::kHang;
  found.headline = "HANG at collective #5: rank 2 never entered";
  found.created_unix_ms = kFound;
  rundir::WriteDiagnosis(run, found, found.headline + "\n");
}

// What `cp -r` (or an archive, or a later `touch`) does: every file's time is now, or later.
void ResetFileTimes(const std::string& dir, fs::file_time_type to) {
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    fs::last_write_time(e.path(), to);
  }
}

std::string DiagnoseText(const std::string& dir) {
  ::testing::internal::CaptureStdout();
  const int rc = RunDiagnoseCommand({dir});
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  return out;
}

TEST(OfflineDurationsTest, ACopiedRunDirectoryReadsTheWaitTheRecordsImply) {
  const testing::TestDir tmp("diagnose");
  const std::string original = tmp.string() + "/run";
  WriteHungRun(original);
  const std::string copy = tmp.string() + "/copy";
  fs::copy(original, copy, fs::copy_options::recursive);
  ResetFileTimes(copy, fs::file_time_type::clock::now() + std::chrono::seconds(70));

  const std::string out = DiagnoseText(copy);
  // Entered at kT0, found hung at kT0 + 5.5 s: not until the copy was made, nor until now.
  EXPECT_THAT(out, HasSubstr("ranks 0,1 waiting 5.5 s"));
  EXPECT_THAT(out, HasSubstr("rank 0: waiting in #5 for 5.5 s"));
  EXPECT_THAT(out, HasSubstr("rank 2 [culprit]: never entered #5"));
  // The copy reads exactly as the original, whatever either's file times.
  ResetFileTimes(original, fs::file_time_type::clock::now() - std::chrono::hours(24));
  EXPECT_EQ(out, DiagnoseText(original));
}

// summary.json as a SIGKILLed launcher left it: written when the ranks started, every rank still
// "running", no ends. No rank linked libdlaunch; ranks 0 and 1 wrote telemetry, rank 2 only output.
void WriteKilledLauncherRun(const std::string& dir) {
  const rundir::RunDir run(dir);
  rundir::Summary summary;
  summary.run_id = "killed";
  summary.exit_code = -1;
  summary.updated_unix_ms = kT0;
  for (int r = 0; r < 3; ++r) {
    const rundir::RankDir rank = run.rank(r);
    fs::create_directories(rank.path());
    std::ofstream(rank.stdout_log()) << "step 1\n";
    if (r < 2) {
      rundir::EventLog events(rank.events());
      events.Append(r == 0 ? kT0 + 1000 : kT0 + 4000, r, "telemetry",
                    {{"step", 1}, {"phase", "forward"}});
    }
    rundir::SummaryRank s;
    s.rank = r;
    s.local_rank = r;
    s.host = "a-host-that-is-not-this-one";  // its pid is not probed here
    s.pid = 4000 + r;
    s.status = rundir::RankStatus::kRunning;
    s.start_unix_ms = kT0 - 1000;
    summary.ranks.push_back(s);
  }
  rundir::WriteSummary(run.summary(), summary);
}

TEST(OfflineDurationsTest, AKilledLaunchersRanksTellTheirRecordedLastOutput) {
  const testing::TestDir tmp("diagnose");
  WriteKilledLauncherRun(tmp.string());
  ResetFileTimes(tmp.string(), fs::file_time_type::clock::now() + std::chrono::seconds(70));

  const Diagnosis d = Analyze(LoadRunDir(tmp.string()));
  ASSERT_EQ(d.ranks.size(), 3u);
  // The records end with rank 1's telemetry at kT0 + 4 s: rank 0 had been quiet 3 s by then.
  EXPECT_THAT(d.ranks[0].line, HasSubstr("; last output 3.0 s ago"));
  // Rank 1's output is where the records end, and rank 2's output has no recorded time: nothing
  // says how long either had been quiet.
  EXPECT_THAT(d.ranks[1].line, Not(HasSubstr("last output")));
  EXPECT_THAT(d.ranks[2].line, Not(HasSubstr("last output")));
  EXPECT_THAT(DiagnoseText(tmp.string()),
              AllOf(HasSubstr("last output 3.0 s ago"), Not(HasSubstr("last output 0 ms ago"))));
}

TEST(OfflineDurationsTest, TheRecordedEndIsTheLatestTimeTheRunsRecordsHold) {
  const testing::TestDir tmp("diagnose");
  WriteHungRun(tmp.string());
  ResetFileTimes(tmp.string(), fs::file_time_type::clock::now() + std::chrono::hours(1));
  const RunSnapshot run = LoadRunDir(tmp.string());
  EXPECT_EQ(run.ended_unix_ms, kFound);
  EXPECT_EQ(RecordedEndUnixMs(run, GatherRunFacts(run, {})), kFound);
}

}  // namespace
}  // namespace dlaunch::launcher
