// PyTorch's flight-recorder dumps in the diagnosis: the plain-data pickle reader (Python's own
// pickles at protocols 2-5, hostile input), the dump's fields, and `dlaunch diagnose` on fixture
// run directories (tests/python/fixtures/make_torch_dumps.py).
#include "launcher/python/torch_flight.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/format.h"
#include "launcher/diagnose/analyzer.h"
#include "launcher/diagnose/diagnosis_writer.h"
#include "launcher/diagnose/python_evidence.h"
#include "launcher/diagnose/run_snapshot.h"
#include "launcher/python/pickle_reader.h"
#include "tests/common/test_dir.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using python::PickleLimits;
using python::ReadPickle;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Bytes of a literal, NULs included.
template <size_t N>
std::string B(const char (&s)[N]) {
  return std::string(s, N - 1);
}

std::string Fixture(const std::string& name) {
  return std::string(DLAUNCH_PY_FIXTURES) + "/" + name;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// What /usr/bin/python3's pickle makes of `expr` at `protocol`; "" without that interpreter.
std::string PythonPickle(const std::string& expr, int protocol) {
  const dlaunch::testing::TestDir dir("pickle");
  const fs::path out = dir.path() / "out.pickle";
  const std::string cmd =
      "/usr/bin/python3 -c 'import pickle,sys; sys.stdout.buffer.write("
      "pickle.dumps(" +
      expr + ", protocol=" + std::to_string(protocol) + "))' > " + out.string() + " 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) return "";
  return ReadBytes(out);
}

TEST(PickleReaderTest, ReadsPythonsPicklesAtEveryProtocol) {
  const std::string expr =
      "{\"s\": \"caf\\u00e9\", \"i\": [0, 255, 65535, -1, 2**31, -2**63, 2**63-1], "
      "\"f\": 1.5, \"n\": None, \"b\": [True, False], \"t\": (1, (2, 3), (4,), ()), "
      "7: \"int key\", \"shared\": [[\"x\"]] * 3, \"long\": \"y\" * 300}";
  for (int protocol = 2; protocol <= 5; ++protocol) {
    // bytes have an opcode from protocol 3 on (protocol 2 pickles them through a GLOBAL)
    const std::string bytes = PythonPickle(
        protocol >= 3 ? expr.substr(0, expr.size() - 1) + ", \"by\": b\"ab\"}" : expr, protocol);
    if (bytes.empty()) GTEST_SKIP() << "no /usr/bin/python3";
    std::string error;
    std::optional<json> j = ReadPickle(bytes, &error);
    ASSERT_TRUE(j) << "protocol " << protocol << ": " << error;
    EXPECT_EQ((*j)["s"], "caf\u00e9");
    EXPECT_EQ((*j)["i"], json::parse("[0,255,65535,-1,2147483648,-9223372036854775808,"
                                     "9223372036854775807]"));
    EXPECT_EQ((*j)["f"], 1.5);
    EXPECT_TRUE((*j)["n"].is_null());
    EXPECT_EQ((*j)["b"], json::parse("[true,false]"));
    EXPECT_EQ((*j)["t"], json::parse("[1,[2,3],[4],[]]"));
    EXPECT_EQ((*j)["7"], "int key");
    EXPECT_EQ((*j)["shared"], json::parse("[[\"x\"],[\"x\"],[\"x\"]]"));  // memo references
    EXPECT_EQ((*j)["long"].get<std::string>().size(), 300u);
    if (protocol >= 3) {
      EXPECT_EQ((*j)["by"], "ab");
    }
  }
}

TEST(PickleReaderTest, RefusesAnythingThatWouldRunOrNameCode) {
  std::string error;
  // GLOBAL os system, REDUCE: what a malicious pickle does.
  EXPECT_FALSE(ReadPickle(B("\x80\x02"
                            "cos\nsystem\nX\x02\x00\x00\x00id\x85R."),
                          &error));
  EXPECT_THAT(error, HasSubstr("unsupported opcode 0x63 ('c') at offset 2"));
  const std::string reduce = PythonPickle("__import__('collections').OrderedDict(a=1)", 4);
  if (!reduce.empty()) {
    EXPECT_FALSE(ReadPickle(reduce, &error));
    EXPECT_THAT(error, HasSubstr("only plain data is read"));
  }
  EXPECT_FALSE(ReadPickle(B("\x80\x01N."), &error));  // protocol 1
  EXPECT_THAT(error, HasSubstr("protocol 1"));
}

TEST(PickleReaderTest, HostileInputIsBoundedNeverACrash) {
  std::string error;
  PickleLimits limits;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty input"},
      {B("\x80\x02}q\x00"), "truncated"},
      {B("\x80\x02X\xff\xff\xff\x7f"), "truncated"},  // a 2 GiB string
      {B("\x80\x02\x8d\xff\xff\xff\xff\xff\xff\xff\xff"), "truncated"},
      {B("\x80\x02\x8b\x00\x01\x00\x00"), "too large"},  // a 65536-byte int
      {B("\x80\x02h\x05."), "memo 5 unknown"},
      {B("\x80\x02"
         "a."),
       "stack underflow"},
      {B("\x80\x02"
         "e."),
       "no mark"},
      {B("\x80\x02NN."), "STOP with 2 objects"},
      {B("\x80\x02K\x01K\x02"
         "a."),
       "APPEND on the wrong kind"},
      {B("\x80\x02}(K\x01u."), "odd SETITEMS"},
      {B("\x80\x02}(]K\x01u."), "not a string or an int"},  // a list as a key
  };
  for (const auto& [bytes, why] : cases) {
    EXPECT_FALSE(ReadPickle(bytes, &error)) << why;
    EXPECT_THAT(error, HasSubstr(why));
  }
  // A list that holds itself: a cycle, cut by the depth limit.
  EXPECT_FALSE(ReadPickle(B("\x80\x02]q\x00h\x00"
                            "a."),
                          &error));
  EXPECT_THAT(error, HasSubstr("nested deeper than 64"));
  // Memo references doubling 40 times: 2^40 values if expanded; refused at the value limit.
  std::string bomb =
      B("\x80\x02]q\x00"
        "0");
  for (int i = 0; i < 40; ++i) {
    bomb += std::string("h") + char(i) + "h" + char(i) + "\x86q" + char(i + 1) + "0";
  }
  bomb += std::string("h") + char(40) + ".";
  limits.max_depth = 100;
  EXPECT_FALSE(ReadPickle(bomb, &error, limits));
  EXPECT_THAT(error, HasSubstr("more than"));
  // 100000 nested lists.
  std::string deep = "\x80\x02";
  for (int i = 0; i < 100000; ++i) deep += "]";
  for (int i = 0; i < 99999; ++i) deep += "a";
  deep += ".";
  EXPECT_FALSE(ReadPickle(deep, &error));
  EXPECT_THAT(error, HasSubstr("nested deeper"));
  // Invalid UTF-8 becomes U+FFFD, so the result can always be written as JSON.
  std::optional<json> j = ReadPickle(B("\x80\x02X\x03\x00\x00\x00\xff"
                                       "a\xc0."),
                                     &error);
  ASSERT_TRUE(j) << error;
  EXPECT_EQ(j->get<std::string>(),
            "\xef\xbf\xbd"
            "a\xef\xbf\xbd");
  EXPECT_NO_THROW(j->dump());
  // Every prefix of a real dump: an error, never a crash.
  const std::string dump = ReadBytes(Fixture("torch_fr_hang/rank1/torch_trace_1"));
  ASSERT_GT(dump.size(), 1000u);
  for (size_t n = 0; n < dump.size(); n += 7) {
    EXPECT_FALSE(ReadPickle(std::string_view(dump).substr(0, n), &error)) << n;
  }
}

// Hostile pickles cost what the limit allows, counted as they are read, and no more.
TEST(PickleReaderTest, StopsAtItsMemoryLimitAndTime) {
  PickleLimits limits;
  limits.max_memory_bytes = 16 << 20;
  const size_t n = 8 << 20;
  // A dict, then 200000 references to it: a few bytes each, a whole dict each once expanded.
  std::string memo_refs =
      B("\x80\x02]q\x00}q\x01(X\x01\x00\x00\x00"
        "aK\x01ua");
  for (int batch = 0; batch < 200; ++batch) {
    memo_refs += "(";
    for (int i = 0; i < 1000; ++i) memo_refs += B("h\x01");
    memo_refs += "e";
  }
  const std::vector<std::pair<std::string, std::string>> bombs = {
      {"small objects", "\x80\x02](" + std::string(n, 'N') + "e."},
      {"memo references", memo_refs + "."},
      {"marks", "\x80\x02" + std::string(n, '(')},
      {"dups", "\x80\x02N" + std::string(n, '2')},
      {"memo flood", "\x80\x04N" + std::string(n, '\x94')},
      {"invalid UTF-8", B("\x80\x02X\x00\x00\x80\x00") + std::string(n, '\xff') + "."},
      {"strings", "\x80\x02](" +
                      [] {
                        std::string s;
                        for (int i = 0; i < 40; ++i)
                          s += B("X\x00\x00\x08\x00") + std::string(1 << 19, 's');
                        return s;
                      }() +
                      "e."},
  };
  for (const auto& [what, bytes] : bombs) {
    std::string error;
    python::PickleUsage usage;
    EXPECT_FALSE(ReadPickle(bytes, &error, limits, &usage)) << what;
    EXPECT_THAT(error, HasSubstr("needs more than 16 MiB to read")) << what;
    EXPECT_TRUE(usage.out_of_memory) << what;
    // Stopped at the first thing past the limit, not after.
    EXPECT_LE(usage.peak_memory_bytes, limits.max_memory_bytes + (1 << 20)) << what;
  }
  // The same limit, a real dump: read, at a fraction of it.
  std::string error;
  python::PickleUsage usage;
  ASSERT_TRUE(
      ReadPickle(ReadBytes(Fixture("torch_fr_hang/rank1/torch_trace_1")), &error, limits, &usage))
      << error;
  EXPECT_GT(usage.peak_memory_bytes, 0u);
  EXPECT_LT(usage.peak_memory_bytes, 1u << 20);
  // Past the deadline, reading stops.
  limits.max_memory_bytes = 1u << 30;
  limits.deadline = std::chrono::steady_clock::now();
  EXPECT_FALSE(ReadPickle(std::get<1>(bombs[0]), &error, limits, &usage));
  EXPECT_THAT(error, HasSubstr("stopped at the time limit"));
  EXPECT_TRUE(usage.out_of_time);
}

TEST(TorchFlightTest, ReadsTheDumpFieldsAtProtocols2To5) {
  for (int rank = 0; rank < 3; ++rank) {
    std::string error;
    auto d = python::ReadTorchFlightDump(Fixture("torch_fr_hang/rank" + std::to_string(rank) +
                                                 "/torch_trace_" + std::to_string(rank)),
                                         &error);
    ASSERT_TRUE(d) << error;
    EXPECT_EQ(d->rank, rank);
    EXPECT_EQ(d->version, "2.4");
    EXPECT_EQ(d->comm_lib_version, "2.21.5");
    EXPECT_THAT(d->process_groups["0"].ranks, ElementsAre(0, 1, 2));
    EXPECT_EQ(d->process_groups["0"].desc, "default_pg");
    ASSERT_EQ(d->entries.size(), rank < 2 ? 7u : 5u);
    const python::TorchFlightEntry& e = d->entries.back();
    EXPECT_EQ(e.profiling_name, "nccl:all_reduce");
    EXPECT_EQ(e.op(), "all_reduce");
    EXPECT_EQ(e.pg_name, "0");
    EXPECT_EQ(e.pg_desc, "default_pg");
    EXPECT_EQ(e.collective_seq_id, rank < 2 ? 5 : 4);
    EXPECT_EQ(e.state, rank < 2 ? "started" : "completed");
    EXPECT_THAT(e.input_sizes, ElementsAre(ElementsAre(1024)));
    EXPECT_THAT(e.input_dtypes, ElementsAre("Float"));
    EXPECT_EQ(e.elements(), 1024);
    EXPECT_EQ(e.timeout_ms, 600000);
    EXPECT_EQ(e.call_site(), "/work/train.py:42 train_step");  // torch's own frames skipped
    EXPECT_EQ(e.time_discovered_completed_ns > 0, rank == 2);
  }
}

TEST(TorchFlightTest, OlderDumpsNameTheSeqSeqId) {
  std::string error;
  auto d = python::TorchFlightFromJson(
      json::parse(R"({"version":"1.5","entries":[{"seq_id":3,"profiling_name":"nccl:broadcast",
                   "state":"scheduled","input_sizes":[[2,3]]}]})"),
      &error);
  ASSERT_TRUE(d) << error;
  EXPECT_EQ(d->entries[0].collective_seq_id, 3);
  EXPECT_EQ(d->entries[0].elements(), 6);
  EXPECT_FALSE(python::TorchFlightFromJson(json::parse("[1]"), &error));
  EXPECT_FALSE(python::TorchFlightFromJson(json::parse(R"({"a":1})"), &error));
}

// The dumps stand in for dlaunch's recorder when no rank has one: the hang and its culprit come
// out as from the agent's records, and torch's own view is shown beside it.
TEST(TorchFlightTest, DiagnosisOfAHangFromTorchsDumps) {
  RunSnapshot run = LoadRunDir(Fixture("torch_fr_hang"));
  Diagnosis d = Analyze(run);
  AttachTorchFlight(run, &d);
  EXPECT_EQ(d.kind, DiagnosisKind::kHang) << d.headline;
  EXPECT_THAT(d.culprit_ranks, ElementsAre(2)) << d.headline;
  EXPECT_EQ(d.seq, 5);
  EXPECT_EQ(d.op, "allreduce");
  EXPECT_THAT(d.headline, HasSubstr("rank 2 never entered (last completed #4)"));
  const std::string details = Joined(d.details);
  EXPECT_THAT(details, HasSubstr("rank 0: PyTorch flight recorder (rank0/torch_trace_0, version "
                                 "2.4, 7 entries): last completed pg 0 (default_pg) #4, pg 1 "
                                 "(undefined) #0"));
  EXPECT_THAT(details, HasSubstr("pg 0 (default_pg) #5 nccl:all_reduce Float[1024] started "
                                 "(timeout 600000 ms) at /work/train.py:42 train_step"));
  EXPECT_THAT(details, HasSubstr("PyTorch flight recorder: pg 0 (default_pg) collective #5 "
                                 "nccl:all_reduce: ranks 0,1 started; rank 2 never joined it"));
  const json j = rundir::DiagnosisToJson(d);
  ASSERT_EQ(j["torch_flight"]["dumps"].size(), 3u);
  EXPECT_EQ(j["torch_flight"]["dumps"][1]["entries"].back()["state"], "started");
  EXPECT_EQ(j["torch_flight"]["dumps"][1]["entries"].back()["call_site"],
            "/work/train.py:42 train_step");
  const json& f = j["torch_flight"]["findings"][0];
  EXPECT_EQ(f["kind"], "missing_ranks");
  EXPECT_EQ(f["pg"], "0");
  EXPECT_EQ(f["collective_seq_id"], 5);
  EXPECT_EQ(f["missing_ranks"], json::array({2}));
  // diagnosis.json keeps it through a round trip.
  EXPECT_EQ(rundir::DiagnosisToJson(rundir::DiagnosisFromJson(j))["torch_flight"],
            j["torch_flight"]);
}

TEST(TorchFlightTest, DiagnosisOfASizeMismatchFromTorchsDumps) {
  RunSnapshot run = LoadRunDir(Fixture("torch_fr_mismatch"));
  Diagnosis d = Analyze(run);
  AttachTorchFlight(run, &d);
  EXPECT_EQ(d.kind, DiagnosisKind::kMismatch) << d.headline;
  EXPECT_EQ(d.mismatch, rundir::MismatchKind::kSizeOrSyntax);
  EXPECT_THAT(d.culprit_ranks, ElementsAre(1));
  EXPECT_EQ(d.seq, 3);
  EXPECT_THAT(Joined(d.details),
              HasSubstr("PyTorch flight recorder: SIZE_OR_SYNTAX_MISMATCH at pg 0 (default_pg) "
                        "collective #3: rank 1 called nccl:all_reduce Float[1040] while rank 0 "
                        "called nccl:all_reduce Float[1024]"));
  const json f = rundir::DiagnosisToJson(d)["torch_flight"]["findings"][0];
  EXPECT_EQ(f["kind"], "SIZE_OR_SYNTAX_MISMATCH");
  EXPECT_EQ(f["culprit_ranks"], json::array({1}));
}

class TorchFlightDirTest : public ::testing::Test {
 protected:
  void SetUp() override { fs::copy(Fixture("torch_fr_hang"), run_, fs::copy_options::recursive); }
  const dlaunch::testing::TestDir test_dir_{"torchfr"};
  const fs::path run_ = test_dir_.path();
};

// With the agent's records there, they decide; torch's dumps are shown beside them.
TEST_F(TorchFlightDirTest, AgentRecordsDecideTorchsAreShown) {
  std::ofstream(run_ / "rank0" / "flight.json")
      << R"({"schema":"dlaunch.flight/1","rank":0,"world_size":3,"backend":"nccl",)"
      << R"("reason":"exit","entries":[{"seq":0,"op":"allreduce","count":8,"state":"completed"}]})";
  RunSnapshot run = LoadRunDir(run_.string());
  EXPECT_EQ(run.ranks[0].flight.reason, "exit");
  EXPECT_NE(run.ranks[1].flight_state, rundir::FileState::kOk);
  Diagnosis d = Analyze(run);
  AttachTorchFlight(run, &d);
  EXPECT_THAT(Joined(d.details), HasSubstr("rank 2 never joined it"));
}

TEST_F(TorchFlightDirTest, HostileDumpFilesAreNamedAsSkipped) {
  // Garbage, a FIFO, a 65 MiB sparse file, a pickle that is not a dump; other names ignored.
  std::ofstream(run_ / "rank0" / "torch_trace_0") << "not a pickle";
  fs::remove(run_ / "rank1" / "torch_trace_1");
  ASSERT_EQ(::mkfifo((run_ / "rank1" / "torch_trace_1").c_str(), 0600), 0);
  {
    std::ofstream big(run_ / "rank2" / "torch_trace_2");
    big.seekp((65 << 20) - 1);
    big.put('x');
  }
  std::ofstream(run_ / "rank2" / "torch_trace_9") << B("\x80\x02]q\x00.");
  std::ofstream(run_ / "rank2" / "torch_trace_x") << "ignored";
  RunSnapshot run = LoadRunDir(run_.string());
  std::string skipped;
  for (const rundir::SkippedEvidence& s : run.skipped_evidence.files) {
    skipped += s.file + ": " + s.reason + "\n";
  }
  EXPECT_THAT(skipped, HasSubstr("rank0/torch_trace_0: not a readable pickle: unsupported opcode"));
  EXPECT_THAT(skipped, HasSubstr("rank1/torch_trace_1: not a regular file"));
  EXPECT_THAT(skipped, HasSubstr("rank2/torch_trace_2: larger than"));
  EXPECT_THAT(skipped, HasSubstr("rank2/torch_trace_9: not a dict"));
  EXPECT_EQ(run.skipped_evidence.count, 4);
  Diagnosis d = Analyze(run);
  AttachTorchFlight(run, &d);
  EXPECT_TRUE(d.torch_flight.empty());
  // diagnosis.json names each with its reason, through a round trip; diagnosis.txt in one line.
  const json j = rundir::DiagnosisToJson(d);
  ASSERT_EQ(j["skipped_evidence"].size(), 4u);
  EXPECT_EQ(j["skipped_evidence_count"], 4);
  EXPECT_EQ(j["skipped_evidence"][1]["file"], "rank1/torch_trace_1");
  EXPECT_THAT(j["skipped_evidence"][1]["reason"].get<std::string>(),
              HasSubstr("not a regular file"));
  EXPECT_EQ(rundir::DiagnosisToJson(rundir::DiagnosisFromJson(j)), j);
  const std::string text = FormatDiagnosis(d);
  EXPECT_THAT(text, HasSubstr("  not read or left out: 4 files (rank0/torch_trace_0: not a "
                              "readable pickle: unsupported opcode"));
  EXPECT_THAT(text, HasSubstr("; and 1 more) (diagnosis.json's skipped_evidence)\n"));
}

// The reading of a pass is bounded in total: bytes of the files and time, all ranks together.
TEST_F(TorchFlightDirTest, ThePassBudgetSkipsTheRestAndSaysWhy) {
  const std::string dump = ReadBytes(Fixture("torch_fr_hang/rank1/torch_trace_1"));
  python::TorchReadLimits limits;
  limits.file_bytes = dump.size() * 2;  // two of the three dumps
  RunSnapshot run = LoadRunDir(run_.string(), 0, limits);
  EXPECT_EQ(run.ranks[0].torch_flight.size() + run.ranks[1].torch_flight.size() +
                run.ranks[2].torch_flight.size(),
            2u);
  ASSERT_EQ(run.skipped_evidence.count, 1);
  EXPECT_THAT(run.skipped_evidence.files[0].reason,
              HasSubstr("not read: it would pass the " +
                        base::FormatBytes(static_cast<int64_t>(limits.file_bytes)) +
                        " of torch dumps one diagnosis reads"));
  limits = {};
  limits.time = std::chrono::milliseconds(0);
  run = LoadRunDir(run_.string(), 0, limits);
  ASSERT_EQ(run.skipped_evidence.count, 3);
  EXPECT_THAT(run.skipped_evidence.files[2].reason, HasSubstr("for reading torch dumps are spent"));
  limits = {};
  limits.kept_bytes = 1;  // the first dump read is all that may be kept
  run = LoadRunDir(run_.string(), 0, limits);
  // The bound is looked at before each read: the dumps already being read by the other threads
  // when the first is kept are kept too.
  EXPECT_GE(run.skipped_evidence.count, 3 - python::kTorchReadThreads);
  EXPECT_LE(run.skipped_evidence.count, 2);
  for (const auto& f : run.skipped_evidence.files) EXPECT_THAT(f.reason, HasSubstr("all they may"));
}

// What a dump may put into the diagnosis is bounded however large its fields: strings cut on a
// character boundary, the newest entries, the first tensors, dims, frames and ranks.
TEST(TorchFlightTest, KeepsBoundedPartsOfHugeFields) {
  json entry = {{"profiling_name", "nccl:" + std::string(300, 'a') + "\u00e9\u00e9"},
                {"collective_seq_id", 1},
                {"input_sizes", json::array()},
                {"input_dtypes", json::array()},
                {"frames", json::array()}};
  for (int i = 0; i < 100; ++i) {
    entry["input_sizes"].push_back(std::vector<int>(40, 3));
    entry["input_dtypes"].push_back(std::string(1000, 'F'));
    entry["frames"].push_back(
        {{"name", std::string(1000, 'n')}, {"filename", "x.py"}, {"line", 1}});
  }
  std::string ranks = "[";
  for (int r = 0; r < 1100; ++r) ranks += std::to_string(r) + ", ";
  json doc = {{"version", "2.4"}, {"entries", json::array()}, {"pg_config", json::object()}};
  for (int g = 0; g < 2000; ++g) {
    doc["pg_config"][std::to_string(g)] = {{"name", "g"}, {"ranks", ranks + "1100]"}};
  }
  for (int i = 0; i < 4200; ++i) {
    entry["collective_seq_id"] = i;
    doc["entries"].push_back(entry);
  }
  std::string error;
  std::optional<python::TorchFlightDump> d = python::TorchFlightFromJson(doc, &error);
  ASSERT_TRUE(d) << error;
  ASSERT_EQ(d->entries.size(), python::kMaxTorchEntries);
  EXPECT_EQ(d->entries.front().collective_seq_id, 4200 - 4096);  // the newest kept
  const python::TorchFlightEntry& e = d->entries.back();
  EXPECT_LE(e.profiling_name.size(), python::kMaxTorchText);
  EXPECT_NO_THROW(json(e.profiling_name).dump());  // still valid UTF-8
  EXPECT_EQ(e.input_sizes.size(), python::kMaxTorchTensors);
  EXPECT_EQ(e.input_sizes[0].size(), python::kMaxTorchDims);
  EXPECT_EQ(e.input_dtypes.size(), python::kMaxTorchTensors);
  EXPECT_EQ(e.input_dtypes[0].size(), python::kMaxTorchText);
  EXPECT_EQ(e.frames.size(), python::kMaxTorchFrames);
  EXPECT_EQ(d->process_groups.size(), python::kMaxTorchGroups);
  size_t all_ranks = 0;
  for (const auto& [name, g] : d->process_groups) all_ranks += g.ranks.size();
  EXPECT_EQ(all_ranks, python::kMaxTorchGroupRanks);
  EXPECT_LT(python::KeptBytes(*d), size_t{256} << 20);
}

}  // namespace
}  // namespace dlaunch::launcher
