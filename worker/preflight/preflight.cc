// The suite: hang test first (on a communicator of its own), then, on a communicator rebuilt
// under a fresh store prefix, the bandwidth sweep and the p2p matrix; rank 0 judges and writes
// preflight.json, and the verdict is broadcast so every rank exits with the same code.
#include "worker/preflight/preflight.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "core/comm/comm_options.h"
#include "core/comm/flight_recorder.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "core/run_dir/paths.h"
#include "core/run_dir/report_files.h"
#include "core/telemetry.h"
#include "worker/preflight/bandwidth_sweep.h"
#include "worker/preflight/hang_test.h"
#include "worker/preflight/p2p_matrix.h"
#include "worker/preflight/preflight_options.h"

namespace dlaunch::worker {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kExitPass = kExitOk;
constexpr int kExitFail = kExitUnhealthy;

json SweepJson(const SweepResult& s) {
  json rows = json::array();
  for (const SweepRow& r : s.rows) {
    rows.push_back({{"size", r.bytes},
                    {"count", r.count},
                    {"type", s.dtype},
                    {"redop", s.redop},
                    {"root", s.root},
                    {"time_us", r.time_us},
                    {"algbw_gbps", r.algbw},
                    {"busbw_gbps", r.busbw},
                    {"wrong", r.wrong}});
  }
  json j = {{"op", s.op}, {"rows", rows}, {"avg_busbw_gbps", s.avg_busbw}};
  if (!s.skipped.empty()) j["skipped"] = s.skipped;
  return j;
}

json P2PJson(const P2PResult& p) {
  json links = json::array();
  for (const SlowLink& l : p.slow_links)
    links.push_back({{"src", l.src}, {"dst", l.dst}, {"gbps", l.gbps}});
  json j = {{"bytes", p.bytes},
            {"iters", p.iters},
            {"matrix_gbps", p.gbps},
            {"median_gbps", p.median_gbps},
            {"slow_link_factor", p.slow_factor},
            {"slow_links", links},
            {"slow_ranks", p.slow_ranks},
            {"wrong", p.wrong}};
  if (!p.skipped.empty()) j["skipped"] = p.skipped;
  return j;
}

json HangJson(const HangTestResult& h) {
  json ranks = json::array();
  for (const HangTestRank& r : h.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"skipped_collective", r.skipped},
                     {"detected", r.detected},
                     {"elapsed_ms", r.elapsed_ms},
                     {"missing_ranks", r.missing_ranks},
                     {"message", r.message}});
  }
  json j = {{"ran", h.ran},       {"hang_rank", h.hang_rank},
            {"seq", h.seq},       {"timeout_ms", h.timeout_ms},
            {"passed", h.passed}, {"problems", h.problems},
            {"ranks", ranks}};
  if (!h.skipped.empty()) j["skipped"] = h.skipped;
  return j;
}

// Where coordinator commands go while the suite's communicator lives.
struct CommandTarget {
  std::mutex mu;
  core::Communicator* comm = nullptr;
  std::string flight_path;
  std::function<void(const std::string&, const std::string&)> report_event;

  void Handle(const std::string& command, const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu);
    if (comm == nullptr) return;
    if (command == "abort") {
      comm->Abort();
    } else if (command == "dump" && !flight_path.empty()) {
      try {
        comm->flight_recorder().DumpJson(flight_path, reason.empty() ? "request" : reason);
        if (report_event) {
          report_event("dumped", json{{"path", flight_path}, {"reason", reason}}.dump());
        }
      } catch (const std::exception& e) {
        std::cerr << "dlaunch preflight: " << e.what() << std::endl;
      }
    }
  }
};

class Suite {
 public:
  Suite(const PreflightContext& ctx, PreflightOptions options, std::string backend)
      : ctx_(ctx), options_(std::move(options)), backend_(std::move(backend)) {
    store_ = ctx.store ? ctx.store : core::MakeMemoryStore();
  }

  int Run();

 private:
  core::CommOptions BaseOptions() const {
    core::CommOptions o;
    o.backend = backend_;
    o.rank = ctx_.rank;
    o.size = ctx_.world_size;
    o.timeout = options_.collective_timeout;
    o.iface = options_.iface;
    o.device_index = -1;
    return o;
  }
  void ReportStatus(core::Communicator* comm) {
    if (!ctx_.report_status) return;
    core::RankStatus s;
    s.phase = core::Phase::kPreflight;
    if (comm) {
      s.last_started_seq = comm->flight_recorder().last_started_seq();
      s.last_completed_seq = comm->flight_recorder().last_completed_seq();
      s.current_op = comm->flight_recorder().current_op();
    }
    ctx_.report_status(s);
  }
  void Event(const std::string& kind, const json& body) {
    if (ctx_.report_event) ctx_.report_event(kind, body.dump());
  }
  std::vector<std::string> Judge(const std::vector<SweepResult>& sweeps, const P2PResult* p2p,
                                 const HangTestResult& hang) const;

  const PreflightContext& ctx_;
  const PreflightOptions options_;
  const std::string backend_;
  std::shared_ptr<core::Store> store_;
};

std::vector<std::string> Suite::Judge(const std::vector<SweepResult>& sweeps, const P2PResult* p2p,
                                      const HangTestResult& hang) const {
  std::vector<std::string> reasons;
  for (const SweepResult& s : sweeps) {
    for (const SweepRow& r : s.rows) {
      if (r.wrong > 0) {
        reasons.push_back(s.op + ": " + std::to_string(r.wrong) + " wrong elements at " +
                          std::to_string(r.bytes) + " B");
      }
    }
    if (options_.min_busbw > 0 && !s.rows.empty() && s.rows.back().busbw < options_.min_busbw) {
      std::ostringstream m;
      m << s.op << ": busbw " << s.rows.back().busbw << " GB/s at " << s.rows.back().bytes
        << " B is below --min-busbw " << options_.min_busbw << " GB/s";
      reasons.push_back(m.str());
    }
  }
  if (p2p && p2p->skipped.empty()) {
    for (const SlowLink& l : p2p->slow_links) {
      std::ostringstream m;
      m << "p2p link " << l.src << "->" << l.dst << ": " << l.gbps << " GB/s is below "
        << p2p->slow_factor << " x median " << p2p->median_gbps << " GB/s";
      reasons.push_back(m.str());
    }
    for (int k : p2p->slow_ranks) {
      reasons.push_back("rank " + std::to_string(k) + ": every link to and from it is slow");
    }
    if (p2p->wrong > 0) {
      reasons.push_back("p2p: " + std::to_string(p2p->wrong) + " corrupted elements");
    }
  }
  for (const std::string& p : hang.problems) reasons.push_back("hang test: " + p);
  return reasons;
}

int Suite::Run() {
  const int n = ctx_.world_size;
  const bool lead = ctx_.rank == 0;
  auto started = std::chrono::steady_clock::now();
  ReportStatus(nullptr);

  HangTestResult hang;
  hang.skipped = "disabled (--no-hang-test)";
  hang.passed = true;
  if (options_.hang_test) {
    HangTestParams hp;
    hp.rank = ctx_.rank;
    hp.world_size = n;
    hp.hang_rank = options_.hang_rank < 0 ? n - 1 : options_.hang_rank;
    hp.timeout = options_.collective_timeout;
    hp.store = core::MakePrefixStore(ctx_.store_prefix + "hang/", store_);
    hp.base_options = BaseOptions();
    if (!ctx_.rank_dir.empty()) {
      hp.base_options.flight_dump_path = rundir::RankDir(ctx_.rank_dir).hang_test_flight();
    }
    hp.make_comm = [](core::CommOptions o) { return core::MakeCommunicator(o); };
    if (lead) {
      std::cout << "# preflight: hang test: rank " << hp.hang_rank << " skips allreduce seq 1; "
                << "timeout " << hp.timeout.count() << " ms" << std::endl;
    }
    hang = RunHangTest(hp);
    if (hang.ran && !hang.ranks.empty()) {
      const HangTestRank& mine = hang.ranks[lead ? ctx_.rank : 0];
      Event("preflight_hang_test", {{"seq", hang.seq},
                                    {"skipped_collective", mine.skipped},
                                    {"hang_rank", hang.hang_rank},
                                    {"timeout_ms", hang.timeout_ms},
                                    {"detected", mine.detected},
                                    {"elapsed_ms", mine.elapsed_ms},
                                    {"missing_ranks", mine.missing_ranks},
                                    {"message", mine.message}});
    }
  }

  // The communicator for the rest: rebuilt under a fresh prefix after the deliberate hang.
  core::CommOptions o = BaseOptions();
  o.store = core::MakePrefixStore(ctx_.store_prefix + "main/", store_);
  const std::string flight_path =
      ctx_.rank_dir.empty() ? "" : rundir::RankDir(ctx_.rank_dir).flight();
  o.flight_dump_path = flight_path;
  o.on_timeout = [this, flight_path](const core::TimeoutReport& r) {
    const char* reason = r.is_hang() ? "timeout" : "error";
    Event(reason, json::parse(r.ToJson()));
    if (!flight_path.empty()) Event("dumped", {{"path", flight_path}, {"reason", reason}});
  };
  std::unique_ptr<core::Communicator> comm = core::MakeCommunicator(o);
  ReportStatus(comm.get());
  // The coordinator's dump/abort commands reach the communicator through this holder, which
  // outlives the communicator and is emptied before it goes.
  auto holder = std::make_shared<CommandTarget>();
  holder->comm = comm.get();
  holder->flight_path = flight_path;
  holder->report_event = ctx_.report_event;
  if (ctx_.set_command_handler) {
    ctx_.set_command_handler([holder](const std::string& command, const std::string& reason) {
      holder->Handle(command, reason);
    });
  }
  struct Release {
    std::shared_ptr<CommandTarget> holder;
    ~Release() {
      std::lock_guard<std::mutex> lock(holder->mu);
      holder->comm = nullptr;
    }
  } release{holder};

  std::vector<SweepResult> sweeps;
  BandwidthSweep sweep(*comm, options_, [&] { ReportStatus(comm.get()); });
  for (const std::string& op : options_.ops) {
    sweeps.push_back(sweep.Run(op));
    if (lead) std::cout << FormatSweepTable(sweeps.back(), n, backend_) << std::flush;
  }

  std::optional<P2PResult> p2p;
  NodeMatrix nodes;
  if (options_.p2p) {
    p2p = RunP2PMatrix(*comm, options_);
    nodes = FoldPerNode(*p2p, ctx_.local_world_size);
    if (lead) std::cout << FormatP2PTable(*p2p) << FormatNodeTable(nodes) << std::flush;
  }

  // Rank 0 judges; everybody exits with its verdict.
  int verdict = kExitPass;
  if (lead) {
    std::vector<std::string> reasons = Judge(sweeps, p2p ? &*p2p : nullptr, hang);
    for (int k : nodes.slow_nodes) {
      reasons.push_back("node " + std::to_string(k) +
                        ": every link to and from another node is slow");
    }
    verdict = reasons.empty() ? kExitPass : kExitFail;
    if (hang.ran) {
      for (const HangTestRank& r : hang.ranks) {
        if (!r.skipped) std::cout << "# hang test: rank " << r.rank << ": " << r.message << "\n";
      }
    }
    std::cout << "# hang test: "
              << (hang.ran ? (hang.passed ? "passed" : "FAILED") : "skipped, " + hang.skipped)
              << "\n";
    std::cout << "# verdict: " << (verdict == kExitPass ? "PASS" : "FAIL") << "\n";
    for (const std::string& r : reasons) std::cout << "#   " << r << "\n";
    std::cout << std::flush;

    json opts = {{"backend", backend_},
                 {"minbytes", options_.min_bytes},
                 {"maxbytes", options_.max_bytes},
                 {"stepfactor", options_.step_factor},
                 {"warmup_iters", options_.warmup_iters},
                 {"iters", options_.iters},
                 {"ops", options_.ops},
                 {"datatype", core::DataTypeName(options_.dtype)},
                 {"op", core::ReduceOpName(options_.redop)},
                 {"root", options_.root},
                 {"collective_timeout_ms", options_.collective_timeout.count()},
                 {"slow_link_factor", options_.slow_link_factor},
                 {"min_busbw", options_.min_busbw},
                 {"hang_test", options_.hang_test},
                 {"p2p", options_.p2p},
                 {"p2p_bytes", options_.p2p_bytes}};
    json bandwidth = json::array();
    for (const SweepResult& s : sweeps) bandwidth.push_back(SweepJson(s));
    json doc = {{"verdict", verdict == kExitPass ? "PASS" : "FAIL"},
                {"reasons", reasons},
                {"world_size", n},
                {"backend", backend_},
                {"unix_ms", base::UnixMillis()},
                {"duration_s",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()},
                {"options", opts},
                {"bandwidth", bandwidth},
                {"p2p", p2p ? P2PJson(*p2p) : json(nullptr)},
                {"node_matrix", nodes.gbps.empty() ? json(nullptr)
                                                   : json{{"ranks_per_node", nodes.ranks_per_node},
                                                          {"matrix_gbps", nodes.gbps},
                                                          {"median_gbps", nodes.median_gbps},
                                                          {"slow_nodes", nodes.slow_nodes}}},
                {"hang_test", HangJson(hang)}};
    if (!ctx_.run_dir.empty()) {
      rundir::WritePreflight(rundir::RunDir(ctx_.run_dir).preflight(), std::move(doc));
    }
  }
  auto verdict_mem = comm->Allocate(sizeof(int32_t));
  core::Buffer vb = comm->MakeBuffer(verdict_mem.get(), 1, core::DataType::kInt32);
  int32_t v = verdict;
  comm->CopyIn(vb, &v);
  comm->Broadcast(vb, 0)->Wait(options_.collective_timeout);
  comm->CopyOut(&v, vb);

  if (!flight_path.empty()) {
    comm->flight_recorder().DumpJson(flight_path, "exit");
    Event("dumped", {{"path", flight_path}, {"reason", "exit"}});
  }
  core::RankStatus done;
  done.phase = core::Phase::kDone;
  done.last_started_seq = comm->flight_recorder().last_started_seq();
  done.last_completed_seq = comm->flight_recorder().last_completed_seq();
  if (ctx_.report_status) ctx_.report_status(done);
  return v;
}

}  // namespace

void ValidatePreflightArgs(const std::vector<std::string>& args) { ParsePreflightArgs(args); }

int RunPreflight(const PreflightContext& ctx, const std::vector<std::string>& args) {
  try {
    PreflightOptions options = ParsePreflightArgs(args);
    if (options.help) {
      if (ctx.rank == 0) std::cout << PreflightUsage() << std::endl;
      return kExitPass;
    }
    if (options.root >= ctx.world_size) {
      throw UsageError("preflight: --root " + std::to_string(options.root) +
                       " is not a rank of this world of " + std::to_string(ctx.world_size));
    }
    if (options.hang_rank >= ctx.world_size) {
      throw UsageError("preflight: --hang-rank " + std::to_string(options.hang_rank) +
                       " is not a rank of this world of " + std::to_string(ctx.world_size));
    }
    const std::string backend = core::ResolveBackend(options.backend);
    options.ResolveDefaults(backend);
    Suite suite(ctx, options, backend);
    return suite.Run();
  } catch (const UsageError& e) {
    std::cerr << "dlaunch preflight (rank " << ctx.rank << "): " << e.what() << std::endl;
    return kExitUsage;
  } catch (const Error& e) {
    std::cerr << "dlaunch preflight (rank " << ctx.rank << "): " << ErrorKindName(e.kind()) << ": "
              << e.what() << std::endl;
    // A timeout was already reported by the watchdog, with the seq and the missing ranks.
    if (ctx.report_event && e.kind() != ErrorKind::kTimeout) {
      ctx.report_event("error", json{{"message", e.what()}}.dump());
    }
    return e.kind() == ErrorKind::kTimeout ? kExitHang : kExitRankFailed;
  } catch (const std::exception& e) {
    std::cerr << "dlaunch preflight (rank " << ctx.rank << "): " << e.what() << std::endl;
    return kExitRankFailed;
  }
}

}  // namespace dlaunch::worker
