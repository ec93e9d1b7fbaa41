// torch's flight-recorder dumps through dlaunch's one mismatch engine (torch_flight/): which ranks
// carry which tensors of a scatter, gather, broadcast, reduce, all-to-all with splits and
// send/recv; completion from every signal a dump has (torch 2.15's Gloo recorder leaves state at
// "scheduled" and retires the entry); a 2-rank tie settled by each rank's own calls at the same
// call site, with every evidence line agreeing with the headline. Dumps built in memory as torch
// writes them (the fields of torch_flight.h); no ranks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "launcher/diagnose/analyzer.h"
#include "launcher/diagnose/python_evidence.h"
#include "launcher/diagnose/run_snapshot.h"
#include "launcher/diagnose/torch_flight/torch_records.h"

namespace dlaunch::launcher {
namespace {

using nlohmann::json;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr int64_t kT0 = 1796130000000000000;

// One entry as torch 2.x writes it: `in`/`out` are the tensors' sizes, each a Float.
json Entry(int64_t record_id, int64_t seq, const std::string& op, json in, json out, int line = 30,
           const std::string& state = "completed") {
  auto dtypes = [](const json& sizes) {
    return json(std::vector<std::string>(sizes.size(), "Float"));
  };
  const bool p2p = op.rfind("send", 0) == 0 || op.rfind("recv", 0) == 0;
  return {
      {"record_id", record_id},
      {"pg_id", 0},
      {"process_group", {"0", "default_pg"}},
      {"collective_seq_id", seq},
      {"p2p_seq_id", 0},
      {"profiling_name", "gloo:" + op},
      {"time_created_ns", kT0 + record_id * 1000000},
      {"input_sizes", in},
      {"input_dtypes", dtypes(in)},
      {"output_sizes", out},
      {"output_dtypes", dtypes(out)},
      {"state", state},
      {"retired", false},
      {"timeout_ms", 1800000},
      {"is_p2p", p2p},
      {"frames", json::array({{{"name", "main"}, {"filename", "/work/ops.py"}, {"line", line}}})}};
}

json Dump(int world, json entries, int64_t last_completed = -1) {
  std::string ranks = "[";
  for (int r = 0; r < world; ++r) ranks += (r ? ", " : "") + std::to_string(r);
  return {{"version", "2.10"},
          {"pg_config", {{"0", {{"name", "0"}, {"desc", "default_pg"}, {"ranks", ranks + "]"}}}}},
          {"pg_status",
           {{"0",
             {{"last_enqueued_collective", last_completed},
              {"last_started_collective", last_completed},
              {"last_completed_collective", last_completed}}}}},
          {"entries", std::move(entries)}};
}

// A run whose ranks left only torch's dumps, read as LoadRunDir reads them.
RunSnapshot RunOf(const std::vector<json>& docs) {
  RunSnapshot run;
  run.world_size = static_cast<int>(docs.size());
  run.ranks.resize(docs.size());
  for (size_t r = 0; r < docs.size(); ++r) {
    std::string error;
    std::optional<python::TorchFlightDump> d = python::TorchFlightFromJson(docs[r], &error);
    EXPECT_TRUE(d) << error;
    if (!d) continue;
    d->rank = static_cast<int>(r);
    d->file = "rank" + std::to_string(r) + "/torch_trace_" + std::to_string(r);
    run.ranks[r].rank = static_cast<int>(r);
    run.ranks[r].torch_flight.push_back(std::move(*d));
  }
  UseTorchFlightWithoutOther(&run);
  return run;
}

Diagnosis Diagnose(const RunSnapshot& run) {
  Diagnosis d = Analyze(run);
  AttachTorchFlight(run, &d);
  return d;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// What four ranks of a correct program record: a scatter from rank 0 (only it passes a
// scatter_list), a gather to rank 0 (only it passes a gather_list), a broadcast from rank 1, a
// reduce to rank 0, an all-to-all with uneven splits, a send/recv, then two all-reduces that
// torch 2.15's Gloo recorder left "scheduled": one retired, one past pg_status' last completed.
std::vector<json> RootedOps(int world) {
  std::vector<json> docs;
  for (int r = 0; r < world; ++r) {
    const json chunk = {{8, 10}};
    json scatter_list = json::array(), gather_list = json::array();
    for (int i = 0; i < world; ++i) {
      scatter_list.push_back({8, 10});
      gather_list.push_back({8});
    }
    json e = json::array();
    e.push_back(Entry(0, 0, "scatter", r == 0 ? scatter_list : json::array(), chunk, 10));
    e.push_back(Entry(1, 1, "gather", {{8}}, r == 0 ? gather_list : json::array(), 11));
    e.push_back(Entry(2, 2, "broadcast", {{16}}, {{16}}, 12));
    e.push_back(Entry(3, 3, "reduce", {{16}}, {{16}}, 13));
    e.push_back(Entry(4, 4, "all_to_all", {{10 + r}}, {{10 + world - r}}, 14));
    int64_t id = 5;
    if (r == 0) e.push_back(Entry(id++, 5, "send 0->1", {{5}}, {{5}}, 15));
    if (r == 1) e.push_back(Entry(id++, 5, "recv 1<-0", {{5}}, {{5}}, 16));
    json retired = Entry(id++, 5, "all_reduce", {{64}}, {{64}}, 17, "scheduled");
    retired["retired"] = true;
    e.push_back(retired);
    e.push_back(Entry(id++, 6, "all_reduce", {{64}}, {{64}}, 18, "scheduled"));
    docs.push_back(Dump(world, std::move(e), 6));
  }
  return docs;
}

TEST(TorchSemanticsTest, ASuccessfulScatterGatherBroadcastAndAlltoallIsNoMismatch) {
  for (int world : {2, 3, 4}) {
    RunSnapshot run = RunOf(RootedOps(world));
    const Diagnosis d = Diagnose(run);
    EXPECT_NE(d.kind, DiagnosisKind::kMismatch) << world << ": " << d.headline;
    EXPECT_THAT(d.culprit_ranks, IsEmpty()) << d.headline;
    EXPECT_THAT(Joined(d.details), Not(HasSubstr("MISMATCH"))) << Joined(d.details);
    EXPECT_THAT(d.torch_flight["findings"], IsEmpty()) << d.torch_flight["findings"].dump(2);
  }
}

// Completion from every signal: state "completed", retired, a discovered completion time, or the
// group's pg_status last_completed_collective; started likewise.
TEST(TorchSemanticsTest, CompletionIsReadFromEverySignalOfTheDump) {
  RunSnapshot run = RunOf(RootedOps(2));
  for (const RankRecord& r : run.ranks) {
    ASSERT_EQ(r.flight_state, rundir::FileState::kOk);
    EXPECT_EQ(r.flight.LastCompletedSeq(), 6) << r.rank;
    for (const rundir::FlightEntry& e : r.flight.entries) {
      EXPECT_EQ(e.state, rundir::OpState::kCompleted) << r.rank << " #" << e.seq;
    }
  }
  const Diagnosis d = Diagnose(run);
  const std::string details = Joined(d.details);
  EXPECT_THAT(details, HasSubstr("last completed pg 0 (default_pg) #6")) << details;
  EXPECT_THAT(details, Not(HasSubstr("scheduled"))) << details;

  python::TorchFlightDump dump = run.ranks[0].torch_flight.back();
  python::TorchFlightEntry e = dump.entries.back();                        // #6, "scheduled"
  EXPECT_EQ(torch_flight::StateOf(e, dump), rundir::OpState::kCompleted);  // pg_status
  dump.pg_status["0"].last_completed = 5;
  EXPECT_EQ(torch_flight::StateOf(e, dump), rundir::OpState::kStarted);  // last_started is 6
  dump.pg_status["0"].last_started = 5;
  EXPECT_EQ(torch_flight::StateOf(e, dump), rundir::OpState::kScheduled);
  e.time_discovered_started_ns = kT0;
  EXPECT_EQ(torch_flight::StateOf(e, dump), rundir::OpState::kStarted);
  e.retired = true;
  EXPECT_EQ(torch_flight::StateOf(e, dump), rundir::OpState::kCompleted);
  e.retired = false;
  e.time_discovered_completed_ns = kT0 + 1;
  EXPECT_EQ(torch_flight::StateOf(e, dump), rundir::OpState::kCompleted);
}

// The tensors the semantics compare still have to agree: a receiving rank's scatter chunk, a
// rank's gather input, an all-to-all's dtype, a send and the recv it pairs with.
TEST(TorchSemanticsTest, WhatEveryRankCarriesStillHasToAgree) {
  struct Case {
    int entry;  // of rank 2's RootedOps(3) record
    json in, out;
    std::string kind;
  };
  const std::vector<Case> cases = {
      {0, json::array(), {{8, 11}}, "SIZE_OR_SYNTAX_MISMATCH"},
      {1, {{9}}, json::array(), "SIZE_OR_SYNTAX_MISMATCH"},
      {2, {{16}}, {{17}}, "SIZE_OR_SYNTAX_MISMATCH"},
      {3, {{15}}, {{16}}, "SIZE_OR_SYNTAX_MISMATCH"},
  };
  for (const Case& c : cases) {
    std::vector<json> docs = RootedOps(3);
    json& e = docs[2]["entries"][c.entry];
    e["input_sizes"] = c.in;
    e["output_sizes"] = c.out;
    e["input_dtypes"] = std::vector<std::string>(c.in.size(), "Float");
    e["output_dtypes"] = std::vector<std::string>(c.out.size(), "Float");
    const Diagnosis d = Diagnose(RunOf(docs));
    EXPECT_EQ(d.kind, DiagnosisKind::kMismatch) << c.entry << ": " << d.headline;
    EXPECT_THAT(d.culprit_ranks, ElementsAre(2)) << d.headline;
    ASSERT_FALSE(d.torch_flight["findings"].empty()) << c.entry;
    const json& f = d.torch_flight["findings"][0];
    EXPECT_EQ(f["kind"], c.kind) << f.dump();
    EXPECT_EQ(f["culprit_ranks"], json::array({2})) << f.dump();
    EXPECT_EQ(f["collective_seq_id"], c.entry) << f.dump();
  }
  std::vector<json> docs = RootedOps(3);
  docs[1]["entries"][4]["input_dtypes"] = {"Double"};  // the all-to-all
  Diagnosis d = Diagnose(RunOf(docs));
  EXPECT_EQ(d.mismatch, rundir::MismatchKind::kDtype) << d.headline;
  EXPECT_THAT(d.culprit_ranks, ElementsAre(1)) << d.headline;
  // Rank 0 sends 6 floats where rank 1 receives 5: the sender, in torch's findings.
  docs = RootedOps(3);
  docs[0]["entries"][5]["input_sizes"] = {{6}};
  d = Diagnose(RunOf(docs));
  const json& f = d.torch_flight["findings"][0];
  EXPECT_EQ(f["kind"], "SIZE_OR_SYNTAX_MISMATCH") << d.torch_flight.dump(2);
  EXPECT_EQ(f["culprit_ranks"], json::array({0})) << f.dump();
  EXPECT_THAT(f["line"].get<std::string>(), HasSubstr("rank 0 called gloo:send 0->1 Float[6] while "
                                                      "rank 1 called gloo:recv 1<-0 Float[5]"));
}

// 16,384 floats at one call site for #0-#3 on every rank; at #4 rank 1's is 256 short. Gloo
// aborts rank 1 (it received more than it posted), but its own history names it, at 2 ranks as
// at 3, and no evidence line argues for rank 0.
std::vector<json> ShortTensor(int world) {
  std::vector<json> docs;
  for (int r = 0; r < world; ++r) {
    json e = json::array();
    for (int s = 0; s < 4; ++s) e.push_back(Entry(s, s, "all_reduce", {{16384}}, {{16384}}));
    const int n = r == 1 ? 16128 : 16384;
    e.push_back(Entry(4, 4, "all_reduce", {{n}}, {{n}}, 30, "started"));
    docs.push_back(Dump(world, std::move(e), 3));
  }
  return docs;
}

TEST(TorchSemanticsTest, TheSmallerTensorAtTwoRanksNamesTheRankThatChangedIt) {
  for (int world : {2, 3}) {
    RunSnapshot run = RunOf(ShortTensor(world));
    run.ranks[1].stderr_tail = {
        "  what():  [enforce fail at ../gloo/transport/tcp/pair.cc:446] op.preamble.length <= "
        "op.nbytes. 65536 vs 64512"};
    const Diagnosis d = Diagnose(run);
    EXPECT_EQ(d.kind, DiagnosisKind::kMismatch) << d.headline;
    EXPECT_THAT(d.culprit_ranks, ElementsAre(1)) << d.headline;
    EXPECT_EQ(d.seq, 4);
    EXPECT_THAT(d.headline, HasSubstr("rank 1 called allreduce float ")) << d.headline;
    if (world == 2) {
      EXPECT_THAT(d.headline, HasSubstr("(a tie, decided by each rank's own earlier calls at "
                                        "/work/ops.py:30 main: rank 1 changed its call there)"));
    }
    const std::string details = Joined(d.details);
    EXPECT_THAT(details, Not(HasSubstr("sender"))) << details;
    EXPECT_THAT(details, HasSubstr("rank 1 called gloo:all_reduce Float[16128] while"));
    const json& f = d.torch_flight["findings"][0];
    EXPECT_EQ(f["culprit_ranks"], json::array({1})) << f.dump();
  }
}

}  // namespace
}  // namespace dlaunch::launcher
