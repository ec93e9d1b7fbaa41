// The analysis engine on fixture run directories, one per injected fault (see
// fixtures/make_fixtures.py): world size 4, faulty rank 2, faulty collective #5.
#include "launcher/diagnose/analyzer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "core/error.h"
#include "launcher/diagnose/diagnosis_writer.h"
#include "launcher/diagnose/run_snapshot.h"
#include "tests/diagnose/test_util.h"

namespace dlaunch::launcher {
namespace {

using ::testing::ElementsAre;
using testing::FixturePath;
using ::testing::HasSubstr;

Diagnosis AnalyzeFixture(const std::string& name) { return Analyze(LoadRunDir(FixturePath(name))); }

TEST(AnalyzerTest, RankThatNeverEnteredIsTheCulprit) {
  Diagnosis d = AnalyzeFixture("hang_never_entered");
  EXPECT_EQ(d.kind, DiagnosisKind::kHang);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2));
  EXPECT_EQ(d.seq, 5);
  EXPECT_EQ(d.op, "allreduce");
  EXPECT_EQ(d.dtype, "float");
  EXPECT_EQ(d.bytes, 4 << 20);
  EXPECT_THAT(d.entered_ranks, ElementsAre(0, 1, 3));
  EXPECT_THAT(d.missing_ranks, ElementsAre(2));
  EXPECT_EQ(d.headline,
            "HANG at collective #5 allreduce float 4 MiB: ranks 0,1,3 waiting 310 s; rank 2 never "
            "entered (last completed #4, phase data for 312 s)");
  ASSERT_EQ(d.ranks.size(), 4u);
  EXPECT_EQ(d.ranks[2].StateText(), "never_entered");
  EXPECT_TRUE(d.ranks[2].culprit);
  EXPECT_EQ(d.ranks[0].StateText(), "waiting");
  EXPECT_EQ(d.ranks[0].last_completed_seq, 4);
  EXPECT_EQ(d.ranks[0].waiting_ms / 1000, 310);
  EXPECT_EQ(d.ranks[2].phase, "data");
  EXPECT_EQ(d.ranks[2].rss_bytes, 800 << 20);
  EXPECT_TRUE(d.problems.empty());
}

TEST(AnalyzerTest, DifferentCountIsASizeMismatch) {
  Diagnosis d = AnalyzeFixture("count_mismatch");
  EXPECT_EQ(d.kind, DiagnosisKind::kMismatch);
  EXPECT_EQ(std::string(rundir::MismatchKindName(d.mismatch)), "SIZE_OR_SYNTAX_MISMATCH");
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2));
  EXPECT_EQ(d.seq, 5);
  EXPECT_EQ(d.count, 1 << 20);  // what the majority called
  EXPECT_THAT(d.headline, HasSubstr("rank 2 called allreduce float x2097152"));
  EXPECT_THAT(d.headline, HasSubstr("while ranks 0,1,3 called allreduce float x1048576"));
}

TEST(AnalyzerTest, BroadcastAmongAllReducesIsATypeMismatch) {
  Diagnosis d = AnalyzeFixture("op_mismatch");
  EXPECT_EQ(d.kind, DiagnosisKind::kMismatch);
  EXPECT_EQ(std::string(rundir::MismatchKindName(d.mismatch)), "COLLECTIVE_TYPE_MISMATCH");
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2));
  EXPECT_EQ(d.seq, 5);
  EXPECT_EQ(d.op, "allreduce");
  EXPECT_THAT(d.headline, HasSubstr("MISMATCH at collective #5 (COLLECTIVE_TYPE_MISMATCH): rank 2 "
                                    "called broadcast"));
}

TEST(AnalyzerTest, DifferentDtypeIsADtypeMismatch) {
  RunSnapshot run = LoadRunDir(FixturePath("count_mismatch"));
  for (FlightEntry& e : run.ranks[1].flight.entries) {
    if (e.seq == 5) e.dtype = "half";
  }
  for (FlightEntry& e : run.ranks[2].flight.entries) {
    if (e.seq == 5) e.count = 1 << 20;
  }
  Diagnosis d = Analyze(run);
  EXPECT_EQ(d.kind, DiagnosisKind::kMismatch);
  EXPECT_EQ(std::string(rundir::MismatchKindName(d.mismatch)), "COLLECTIVE_DTYPE_MISMATCH");
  EXPECT_THAT(d.culprit_ranks, ElementsAre(1));
  EXPECT_EQ(d.seq, 5);
}

TEST(AnalyzerTest, PointToPointCallsAreNotComparedAcrossRanks) {
  RunSnapshot run = LoadRunDir(FixturePath("ok"));
  run.ranks[0].flight.entries[3].op = "send";
  run.ranks[1].flight.entries[3].op = "recv";
  Diagnosis d = Analyze(run);
  EXPECT_EQ(d.kind, DiagnosisKind::kOk);
}

TEST(AnalyzerTest, ASendOfAnotherSizeThanItsReceiveNamesTheSender) {
  RunSnapshot run = LoadRunDir(FixturePath("ok"));
  FlightEntry& recv = run.ranks[0].flight.entries[3];
  FlightEntry& send = run.ranks[1].flight.entries[3];
  recv.op = "recv";
  recv.peer = 1;
  send.op = "send";
  send.peer = 0;
  send.count = recv.count + 1024;
  send.bytes = send.count * 4;
  Diagnosis d = Analyze(run);
  EXPECT_EQ(d.kind, DiagnosisKind::kMismatch);
  EXPECT_EQ(std::string(rundir::MismatchKindName(d.mismatch)), "SIZE_OR_SYNTAX_MISMATCH");
  EXPECT_THAT(d.culprit_ranks, ElementsAre(1));
  EXPECT_THAT(d.headline, HasSubstr("rank 1 sent float x"));
  EXPECT_THAT(d.headline, HasSubstr(" to rank 0 (its #3) while rank 0 received float x"));
  EXPECT_THAT(d.details, ::testing::Contains(HasSubstr("so the sender's size is wrong")));

  // A recorder that no longer holds its first calls (a wrapped ring) pairs nothing.
  run.ranks[0].flight.entries.erase(run.ranks[0].flight.entries.begin());
  EXPECT_NE(Analyze(run).kind, DiagnosisKind::kMismatch);
}

TEST(AnalyzerTest, AlltoallvCountsMayDifferAcrossRanks) {
  RunSnapshot run = LoadRunDir(FixturePath("ok"));
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    run.ranks[r].flight.entries[3].op = "alltoallv";
    run.ranks[r].flight.entries[3].count = 100 + static_cast<int64_t>(r);  // each rank's splits
  }
  EXPECT_EQ(Analyze(run).kind, DiagnosisKind::kOk);
  run.ranks[1].flight.entries[3].dtype = "half";  // a dtype still has to agree
  EXPECT_EQ(Analyze(run).kind, DiagnosisKind::kMismatch);
}

TEST(AnalyzerTest, CollectiveSeqLinesUpCollectivesAcrossPointToPointTraffic) {
  // Ranks 0 and 1 exchanged a send/recv before #5, shifting their seqs by one; collective_seq
  // still lines the collectives up, and rank 2's broadcast stands out.
  RunSnapshot run = LoadRunDir(FixturePath("op_mismatch"));
  for (RankRecord& rec : run.ranks) {
    for (FlightEntry& e : rec.flight.entries) {
      e.collective_seq = e.seq;
      if (rec.rank <= 1 && e.seq >= 5) ++e.seq;
    }
    if (rec.rank <= 1) {
      FlightEntry p2p = rec.flight.entries.front();
      p2p.seq = 5;
      p2p.collective_seq = -1;
      p2p.op = rec.rank == 0 ? "send" : "recv";
      p2p.peer = 1 - rec.rank;
      rec.flight.entries.insert(rec.flight.entries.begin() + 5, p2p);
    }
  }
  Diagnosis d = Analyze(run);
  EXPECT_EQ(d.kind, DiagnosisKind::kMismatch);
  EXPECT_EQ(std::string(rundir::MismatchKindName(d.mismatch)), "COLLECTIVE_TYPE_MISMATCH");
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2));
  EXPECT_THAT(d.details, ::testing::Contains(HasSubstr("collective_seq 5")));
}

TEST(AnalyzerTest, RankThatExitedInsideACollectiveIsTheRootCause) {
  Diagnosis d = AnalyzeFixture("exited_in_collective");
  EXPECT_EQ(d.kind, DiagnosisKind::kFailure);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2));
  EXPECT_EQ(d.seq, 5);
  EXPECT_THAT(d.headline,
              HasSubstr("FAILURE: rank 2 reported an error: RuntimeError: injected fault in rank 2 "
                        "(exited with code 1)"));
  EXPECT_THAT(d.headline,
              HasSubstr("inside collective #5 allreduce float 4 MiB (last completed #4)"));
  EXPECT_THAT(d.details, ::testing::Contains("Root Cause (first observed failure):"));
  EXPECT_THAT(d.details, ::testing::Contains("  error_file: rank2/error.json"));
  EXPECT_EQ(d.ranks[2].StateText(), "failed");
  EXPECT_EQ(d.ranks[2].exit_code, 1);
}

TEST(AnalyzerTest, StoppedRankLeftNoDumpOffline) {
  Diagnosis d = AnalyzeFixture("sigstopped");
  EXPECT_EQ(d.kind, DiagnosisKind::kHang);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2));
  EXPECT_EQ(d.seq, 5);
  EXPECT_THAT(d.headline, HasSubstr("ranks 0,1,3 waiting 40 s; rank 2 left no flight recorder dump "
                                    "(last telemetry: step 4, phase forward"));
  EXPECT_EQ(d.ranks[2].stack_top, "clock_nanosleep < nanosleep < train_step < main");
}

RankLiveState Live(int rank, int64_t completed, int64_t started, int64_t heartbeat_ms) {
  RankLiveState live;
  live.rank = rank;
  live.pid = 1000 + rank;
  live.linked = true;
  live.status.last_completed_seq = completed;
  live.status.last_started_seq = started;
  live.status.phase = core::Phase::kForward;
  live.last_heartbeat_unix_ms = heartbeat_ms;
  return live;
}

// The sigstopped fixture as a live monitor sees it: rank 2 stopped after #4, silent for 31 s and
// not answering the dump; the others in #5.
constexpr int64_t kSigstoppedNow = 1764450000000 + 41000;

void SeeRank2StoppedLive(RunSnapshot* run) {
  const int64_t now = kSigstoppedNow;
  for (int r = 0; r < 4; ++r) {
    run->ranks[r].live = r == 2 ? Live(r, 4, 4, now - 31000) : Live(r, 4, 5, now - 100);
    run->ranks[r].answered_dump = r != 2;
  }
  run->ranks[2].process_state = "T (stopped)";
}

AnalyzeOptions LiveHang() {
  AnalyzeOptions options;
  options.now_unix_ms = kSigstoppedNow;
  options.hang_suspected = true;
  return options;
}

TEST(AnalyzerTest, StoppedRankSeenLiveNeverEnteredAndDidNotAnswer) {
  RunSnapshot run = LoadRunDir(FixturePath("sigstopped"));
  SeeRank2StoppedLive(&run);
  Diagnosis d = Analyze(run, LiveHang());
  EXPECT_EQ(d.kind, DiagnosisKind::kHang);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2));
  EXPECT_EQ(d.seq, 5);
  EXPECT_THAT(d.missing_ranks, ElementsAre(2));
  EXPECT_THAT(d.headline, HasSubstr("rank 2 never entered (last completed #4, phase forward"));
  EXPECT_THAT(d.headline, HasSubstr("no heartbeat for 31 s, process T (stopped)"));
  EXPECT_EQ(d.ranks[2].StateText(), "never_entered,stopped");
}

TEST(AnalyzerTest, LiveAndOfflineReadTheSameEvidenceInTheSameOrderOfTrust) {
  // Rank 2 was stopped after #4. Its flight.json is an old periodic one (it ends at #1); its
  // heartbeat says #4: live has that from the heartbeat stream, offline from heartbeat.json.
  RunSnapshot offline = LoadRunDir(FixturePath("sigstopped"));
  const int64_t now = kSigstoppedNow;
  RankRecord& stopped = offline.ranks[2];
  stopped.flight_state = rundir::FileState::kOk;
  stopped.flight = offline.ranks[0].flight;
  stopped.flight.rank = 2;
  while (stopped.flight.entries.back().seq > 4) stopped.flight.entries.pop_back();
  std::vector<rundir::FlightEntry> all = stopped.flight.entries;
  stopped.flight.entries.resize(2);  // #0 and #1
  stopped.heartbeat_unix_ms = now - 31000;
  stopped.heartbeat_last_completed_seq = stopped.heartbeat_last_started_seq = 4;
  RunSnapshot live = offline;
  SeeRank2StoppedLive(&live);
  AnalyzeOptions offline_options;
  offline_options.hang_suspected = true;
  const Diagnosis a = Analyze(live, LiveHang());
  const Diagnosis b = Analyze(offline, offline_options);
  EXPECT_THAT(a.culprit_ranks, ElementsAre(2)) << a.headline;
  EXPECT_EQ(b.culprit_ranks, a.culprit_ranks) << b.headline;
  EXPECT_EQ(a.seq, 5);
  EXPECT_EQ(b.seq, a.seq);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(b.ranks[r].last_completed_seq, a.ranks[r].last_completed_seq) << r;
  }
  EXPECT_EQ(a.ranks[2].last_completed_seq, 4);
  EXPECT_EQ(a.ranks[2].progress_from, "heartbeat");
  EXPECT_EQ(b.ranks[2].progress_from, "heartbeat");
  EXPECT_EQ(b.ranks[0].progress_from, "flight");
  // Without a heartbeat.json the flight tail comes next, then flight.json; each is named.
  stopped.heartbeat_unix_ms = 0;
  stopped.flight.entries = all;
  stopped.tail_first_seq = 2;
  stopped.tail_last_seq = 4;
  Diagnosis c = Analyze(offline, offline_options);
  EXPECT_EQ(c.ranks[2].last_completed_seq, 4);
  EXPECT_EQ(c.ranks[2].progress_from, "flight_tail");
  stopped.flight.entries.resize(2);
  stopped.tail_first_seq = stopped.tail_last_seq = -1;
  c = Analyze(offline, offline_options);
  EXPECT_EQ(c.ranks[2].last_completed_seq, 1);
  EXPECT_EQ(c.ranks[2].progress_from, "flight");
}

TEST(AnalyzerTest, StoppedInsideTheCollectiveIsFoundByItsSilence) {
  RunSnapshot run = LoadRunDir(FixturePath("sigstopped"));
  const int64_t now = 1764450000000 + 41000;
  for (int r = 0; r < 4; ++r) {
    run.ranks[r].live = Live(r, 4, 5, r == 2 ? now - 31000 : now - 100);
    run.ranks[r].answered_dump = r != 2;
  }
  AnalyzeOptions options;
  options.now_unix_ms = now;
  options.hang_suspected = true;
  Diagnosis d = Analyze(run, options);
  EXPECT_EQ(d.kind, DiagnosisKind::kHang);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2));
  EXPECT_EQ(d.seq, 5);
  EXPECT_THAT(d.missing_ranks, ::testing::IsEmpty());
  EXPECT_THAT(d.headline,
              HasSubstr("rank 2 did not answer the dump request, no heartbeat for 31 s"));
}

TEST(AnalyzerTest, StaleHeartbeatDoesNotMoveTheFrontier) {
  // Rank 2 was stopped a while ago: its last heartbeat says #1, the others are waiting in #5.
  RunSnapshot run = LoadRunDir(FixturePath("sigstopped"));
  const int64_t now = 1764450000000 + 41000;
  for (int r = 0; r < 4; ++r) {
    run.ranks[r].live = r == 2 ? Live(r, 1, 1, now - 31000) : Live(r, 4, 5, now - 100);
    run.ranks[r].answered_dump = r != 2;
  }
  run.ranks[2].process_state = "T (stopped)";
  AnalyzeOptions options;
  options.now_unix_ms = now;
  options.hang_suspected = true;
  Diagnosis d = Analyze(run, options);
  EXPECT_EQ(d.kind, DiagnosisKind::kHang);
  EXPECT_EQ(d.seq, 5);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2));
  EXPECT_THAT(d.entered_ranks, ElementsAre(0, 1, 3));
  EXPECT_THAT(d.headline, HasSubstr("(its last heartbeat: completed #1)"));
  EXPECT_EQ(d.ranks[2].StateText(), "stopped");
}

TEST(AnalyzerTest, OutOfMemoryIsExplainedWithTheMemoryTrend) {
  Diagnosis d = AnalyzeFixture("oom");
  EXPECT_EQ(d.kind, DiagnosisKind::kFailure);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(1));
  EXPECT_THAT(d.headline, HasSubstr("rank 1 ran out of memory: CUDA out of memory"));
  bool trend = false;
  for (const std::string& line : d.details) {
    if (line.find("memory trend of rank 1: device allocated 2 GiB -> 7.6 GiB over 19 steps "
                  "(+300 MiB/step)") != std::string::npos) {
      trend = true;
    }
  }
  EXPECT_TRUE(trend) << FormatDiagnosis(d);
  EXPECT_EQ(d.ranks[1].device_allocated_bytes, (2048 + 300 * 19) * (int64_t{1} << 20));
}

TEST(AnalyzerTest, CleanRunIsOkAndListsNcclWarnings) {
  Diagnosis d = AnalyzeFixture("ok");
  EXPECT_EQ(d.kind, DiagnosisKind::kOk);
  EXPECT_TRUE(d.culprit_ranks.empty());
  ASSERT_EQ(d.ranks[3].nccl_warnings.size(), 1u);
  EXPECT_THAT(d.ranks[3].nccl_warnings[0], HasSubstr("NCCL WARN NET/Socket"));
  EXPECT_TRUE(d.ranks[0].nccl_warnings.empty());
  EXPECT_THAT(FormatDiagnosis(d), HasSubstr("NCCL warnings of rank 3"));
}

TEST(AnalyzerTest, CorruptRunDirGivesAPartialReport) {
  RunSnapshot run = LoadRunDir(FixturePath("corrupt"));
  EXPECT_EQ(run.world_size, 4);
  Diagnosis d = Analyze(run);
  auto has_problem = [&](const std::string& text) {
    for (const std::string& p : d.problems) {
      if (p.find(text) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(has_problem("rank1/flight.json is not valid JSON")) << FormatDiagnosis(d);
  EXPECT_TRUE(has_problem("rank3/ missing"));
  EXPECT_TRUE(has_problem("summary.json is not valid JSON"));
  EXPECT_TRUE(has_problem("rank0/events.jsonl: 1 unreadable line"));
  EXPECT_TRUE(has_problem("rank2/error.json is not valid JSON"));
  EXPECT_THAT(d.headline, HasSubstr("[partial: "));
  // What is readable still counts: rank 2 stopped after #4 while rank 0 started #5.
  EXPECT_EQ(d.kind, DiagnosisKind::kHang);
  EXPECT_EQ(d.seq, 5);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2));
  EXPECT_TRUE(DiagnosisToJson(d)["incomplete"].get<bool>());
}

TEST(AnalyzerTest, EveryTruncationOfEveryFileStillAnalyses) {
  const testing::TestDir tmp("diagnose");
  const std::string run_dir = testing::CopyFixture("exited_in_collective", tmp);
  for (const char* file :
       {"summary.json", "rank2/flight.json", "rank0/events.jsonl", "rank2/error.json"}) {
    const std::string path = run_dir + "/" + file;
    std::ifstream in(path);
    const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t cut = 0; cut < whole.size(); cut += 1 + whole.size() / 23) {
      std::ofstream(path, std::ios::trunc) << whole.substr(0, cut);
      Diagnosis d = Analyze(LoadRunDir(run_dir));
      EXPECT_FALSE(d.headline.empty()) << file << " cut at " << cut;
      EXPECT_FALSE(FormatDiagnosis(d).empty());
    }
    std::ofstream(path, std::ios::trunc) << whole;
  }
}

TEST(AnalyzerTest, UnlinkedProgramRankSilentLongestIsTheCulprit) {
  // Four Python ranks (no libdlaunch): no flight recorder, only telemetry times and exits.
  const testing::TestDir tmp("diagnose");
  const std::string run_dir = tmp.string();
  std::ofstream(run_dir + "/summary.json")
      << R"({"run_id":"py","exit_code":3,"ranks":[)"
      << R"({"rank":0,"status":"killed","exit_code":-15,"signal":15,"end_unix_ms":0},)"
      << R"({"rank":1,"status":"killed","exit_code":-15,"signal":15,"end_unix_ms":0},)"
      << R"({"rank":2,"status":"killed","exit_code":-15,"signal":15,"end_unix_ms":0},)"
      << R"({"rank":3,"status":"killed","exit_code":-15,"signal":15,"end_unix_ms":0}]})";
  const int64_t base = 1764450000000;
  for (int r = 0; r < 4; ++r) {
    const std::string dir = run_dir + "/rank" + std::to_string(r);
    ::mkdir(dir.c_str(), 0755);
    std::ofstream(dir + "/stdout.log") << "step 1\n";
    std::ofstream(dir + "/events.jsonl")
        << R"({"kind":"telemetry","rank":)" << r << R"(,"step":1,"phase":"forward","unix_ms":)"
        << (r == 2 ? base : base + 60000) << "}\n";
  }
  Diagnosis d = Analyze(LoadRunDir(run_dir));
  EXPECT_EQ(d.kind, DiagnosisKind::kHang);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2));
  EXPECT_THAT(d.headline, HasSubstr("program not linked with libdlaunch"));
}

TEST(AnalyzerTest, UnlinkedProgramRankOutsideTheCollectiveIsTheCulprit) {
  // Same output times everywhere; the stacks tell: three ranks wait in gloo, one sleeps.
  RunSnapshot run;
  run.run_dir = "/live";
  run.world_size = 4;
  for (int r = 0; r < 4; ++r) {
    RankRecord rec;
    rec.rank = r;
    rec.dir_present = true;
    RankLiveState live;
    live.rank = r;
    live.pid = 100 + r;
    live.last_output_unix_ms = 1000;
    rec.live = live;
    rec.process_state = "S (sleeping)";
    rec.stacks =
        "Thread 2 (Thread 0x2 (LWP 7) \"python3\"):\n#0  0x1 in pthread_cond_wait () from libc\n"
        "#1  0x2 in gloo::transport::tcp::Loop::run () from libgloo.so\n\n"
        "Thread 1 (Thread 0x1 (LWP 6) \"python3\"):\n";
    rec.stacks += r == 1 ? "#0  0x1 in clock_nanosleep () from libc\n#1  0x2 in pysleep ()\n"
                         : "#0  0x1 in syscall () from libc\n#1  0x2 in "
                           "gloo::transport::tcp::UnboundBuffer::waitRecv () from libgloo.so\n"
                           "#2  0x3 in c10d::ProcessGroupGloo::AsyncWork::wait () from libtorch\n";
    run.ranks.push_back(rec);
  }
  AnalyzeOptions options;
  options.now_unix_ms = 400000;
  options.hang_suspected = true;
  Diagnosis d = Analyze(run, options);
  EXPECT_EQ(d.kind, DiagnosisKind::kHang);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(1));
  EXPECT_THAT(d.headline, HasSubstr("HANG: rank 1 not in the collective ranks 0,2,3 wait in"));
  EXPECT_EQ(d.ranks[1].stack_top, "clock_nanosleep < pysleep");
}

TEST(AnalyzerTest, UnlinkedProgramOddStackOutIsTheCulprit) {
  // Same output times; two ranks block reading a pipe, one sleeps: the sleeper stands apart.
  RunSnapshot run;
  for (int r = 0; r < 3; ++r) {
    RankRecord rec;
    rec.rank = r;
    rec.dir_present = true;
    RankLiveState live;
    live.rank = r;
    live.last_output_unix_ms = 1000;
    rec.live = live;
    rec.stacks = "Thread 1 (Thread 0x1 (LWP 6) \"python3\"):\n";
    rec.stacks += r == 1 ? "#0  0x1 in __GI___clock_nanosleep () from libc\n#1  0x2 in pysleep ()\n"
                         : "#0  0x1 in __GI___libc_read () from libc\n#1  0x2 in _Py_read ()\n";
    rec.stacks += "#2  0x3 in main ()\n";
    run.ranks.push_back(rec);
  }
  run.world_size = 3;
  AnalyzeOptions options;
  options.now_unix_ms = 5000;
  options.hang_suspected = true;
  Diagnosis d = Analyze(run, options);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(1));
  EXPECT_THAT(d.headline,
              HasSubstr("rank 1 stands apart by the stack (sleep while the others wait)"));
}

TEST(AnalyzerTest, PythonStacksOfTheAgentStandInForGdbs) {
  const std::string stacks =
      "Python stacks of rank 1 (pid 7) at 2025-11-29 10:00:00: request\n"
      "\n"
      "Thread 140 \"loader\" (most recent call last):\n"
      "  File \"/usr/lib/python3/threading.py\", line 320, in wait\n"
      "    waiter.acquire()\n"
      "\n"
      "Thread 139 \"MainThread\" (main) (most recent call last):\n"
      "  File \"/job/train.py\", line 40, in <module>\n"
      "    main()\n"
      "  File \"/job/train.py\", line 25, in main\n"
      "    time.sleep(3600)\n";
  StackSummary s = ParsePythonStacks(stacks);
  EXPECT_EQ(s.activity, StackActivity::kSleep);
  EXPECT_EQ(s.top, "time.sleep(3600) < train.py:25 main < train.py:40 <module>");
  StackSummary c = ParsePythonStacks(
      "Thread 9 \"MainThread\" (main) (most recent call last):\n"
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line "
      "1536, in all_reduce\n"
      "    work.wait()\n");
  EXPECT_EQ(c.activity, StackActivity::kCollective);
  EXPECT_EQ(ParsePythonStacks("").activity, StackActivity::kNone);

  // A rank with native stacks keeps them; one with the agent's only shows those.
  RankRecord rec;
  rec.rank = 1;
  rec.dir_present = true;
  rec.py_stacks = stacks;
  EXPECT_EQ(GatherFacts(rec, {}).stack.top, s.top);
  rec.stacks = "Thread 1 (Thread 0x1 (LWP 6) \"python3\"):\n#0  0x1 in pysleep ()\n";
  EXPECT_EQ(GatherFacts(rec, {}).stack.top, "pysleep");
}

TEST(AnalyzerTest, EmptyDirectoryIsIncomplete) {
  const testing::TestDir tmp("diagnose");
  Diagnosis d = Analyze(LoadRunDir(tmp.string()));
  EXPECT_EQ(d.kind, DiagnosisKind::kIncomplete);
  EXPECT_FALSE(d.problems.empty());
}

TEST(AnalyzerTest, AnalyzeRunDirWritesTheReportAndTheTimeline) {
  const testing::TestDir tmp("diagnose");
  const std::string run_dir = testing::CopyFixture("exited_in_collective", tmp);
  Diagnosis d = AnalyzeRunDir(run_dir);
  EXPECT_EQ(d.kind, DiagnosisKind::kFailure);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2));
  std::ifstream json(run_dir + "/diagnosis.json");
  EXPECT_EQ(nlohmann::json::parse(json)["culprit_ranks"], nlohmann::json::array({2}));
  std::ifstream txt(run_dir + "/diagnosis.txt");
  std::string first_line;
  std::getline(txt, first_line);
  EXPECT_EQ(first_line, d.headline);
  std::ifstream trace(run_dir + "/trace.json");
  EXPECT_TRUE(nlohmann::json::parse(trace)["traceEvents"].is_array());
  // A directory that is not there is a report too, not an exception.
  Diagnosis gone = AnalyzeRunDir(tmp.string() + "/nope");
  EXPECT_EQ(gone.kind, DiagnosisKind::kIncomplete);
  EXPECT_FALSE(gone.problems.empty());
}

TEST(AnalyzerTest, MissingDirectoryThrowsInvalidArgument) {
  EXPECT_THROW(LoadRunDir("/nonexistent/dlaunch-run"), Error);
}

}  // namespace
}  // namespace dlaunch::launcher
