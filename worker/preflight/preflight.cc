// The suite: hang test first (on a communicator of its own), then, on a communicator rebuilt
// under a fresh store prefix, the bandwidth sweep and the p2p matrix; rank 0 prints the tables
// (nccl-tests' layout, then dlaunch's extras as comment lines), judges and writes preflight.json,
// and the verdict is broadcast so every rank exits with the same code.
#include "worker/preflight/preflight.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "core/base/files.h"
#include "core/base/proc.h"
#include "core/comm/comm_options.h"
#include "core/comm/flight_recorder.h"
#include "core/comm/link_paths.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "core/run_dir/paths.h"
#include "core/run_dir/report_files.h"
#include "worker/preflight/bandwidth_sweep.h"
#include "worker/preflight/deadlock_check.h"
#include "worker/preflight/nccl_table.h"
#include "worker/preflight/op_table.h"
#include "worker/preflight/p2p_matrix.h"
#include "worker/preflight/preflight_options.h"
#include "worker/preflight/preflight_report.h"

namespace dlaunch::worker {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kExitPass = kExitOk;
constexpr int kExitFail = kExitUnhealthy;

// Where coordinator commands go while the suite's communicator lives.
struct CommandTarget {
  std::mutex mu;
  core::Communicator* comm = nullptr;
  std::string flight_path;
  std::function<void(const std::string&, const std::string&)> report_event;

  void Handle(core::CommandKind command, const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu);
    if (comm == nullptr) return;
    if (command == core::CommandKind::kAbort) {
      comm->Abort();
    } else if (command == core::CommandKind::kDump && !flight_path.empty()) {
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
    o.transport = options_.transport;
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
  std::vector<DeviceInfo> Devices();

  const PreflightContext& ctx_;
  const PreflightOptions options_;
  const std::string backend_;
  std::shared_ptr<core::Store> store_;
};

std::vector<DeviceInfo> Suite::Devices() {
  DeviceInfo mine;
  mine.rank = ctx_.rank;
  mine.pid = static_cast<int>(::getpid());
  mine.host = base::Hostname();
  mine.device = ctx_.local_rank;
  mine.name = backend_ == "nccl" ? "CUDA device (nccl)" : "CPU (gloo)";
  auto store = core::MakePrefixStore(ctx_.store_prefix + "devices/", store_);
  store->Set(std::to_string(ctx_.rank), FormatDeviceLine(mine));
  std::vector<DeviceInfo> all;
  if (ctx_.rank != 0) return all;
  const auto timeout = options_.collective_timeout + std::chrono::seconds(10);
  for (int r = 0; r < ctx_.world_size; ++r) {
    DeviceInfo d;
    if (!ParseDeviceLine(store->Get(std::to_string(r), timeout), &d)) d.rank = r;
    all.push_back(d);
  }
  return all;
}

int Suite::Run() {
  const int n = ctx_.world_size;
  const bool lead = ctx_.rank == 0;
  auto started = std::chrono::steady_clock::now();
  ReportStatus(nullptr);

  SuiteResults res;
  res.backend = backend_;
  res.world_size = n;
  res.ranks_per_node = ctx_.local_world_size;
  res.devices = Devices();
  res.hang.skipped = "disabled (--no-hang-test)";
  res.hang.passed = true;
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
    res.hang = RunHangTest(hp);
    const HangTestResult& hang = res.hang;
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
    ctx_.set_command_handler([holder](core::CommandKind command, const std::string& reason) {
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

  const core::LinkPaths paths = core::GatherLinkPaths(*comm, options_.collective_timeout);
  // Text goes to stdout as each table is done; with --json or --csv stdout carries only that,
  // and the verdict lines go to stderr.
  const bool text = options_.format == OutputFormat::kText;
  std::ostream& notes = text ? std::cout : std::cerr;
  if (lead && options_.format == OutputFormat::kCsv) std::cout << CsvHeader() << std::flush;
  BandwidthSweep sweep(*comm, options_, [&] { ReportStatus(comm.get()); });
  for (const std::string& name : options_.ops) {
    res.sweeps.push_back(sweep.Run(*FindOp(name)));
    if (!lead) continue;
    const SweepResult& done = res.sweeps.back();
    const std::string table = FormatSweepTable(done, options_, res.devices);
    if (text) std::cout << table;
    // Each op alone in rank0/<perf_name>.txt: tools written for nccl-tests read one program's
    // output (one "# Avg bus bandwidth" line, one table), not ten ops in a row.
    if (!ctx_.rank_dir.empty() && done.skipped.empty()) {
      rundir::WriteOpTable(rundir::RankDir(ctx_.rank_dir).op_table(done.op->perf_name), table);
    }
    if (options_.format == OutputFormat::kCsv) std::cout << FormatSweepCsv(done);
    std::cout << std::flush;
  }

  if (options_.p2p) {
    res.p2p = RunP2PMatrix(*comm, options_, ctx_.p2p_inject);
    res.nodes = FoldPerNode(*res.p2p, ctx_.local_world_size);
    if (lead) notes << FormatP2PTable(*res.p2p) << FormatNodeTable(res.nodes) << std::flush;
  }
  if (lead) notes << "# link paths: " << paths.Summary() << std::endl;

  // Rank 0 judges; everybody exits with its verdict.
  int verdict = kExitPass;
  if (lead) {
    std::vector<std::string> reasons = JudgeSuite(res, options_);
    verdict = reasons.empty() ? kExitPass : kExitFail;
    notes << FormatVerdict(res, reasons) << std::flush;
    json doc = SuiteJson(
        res, options_, reasons,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    doc["link_paths"] = paths.ToJson();
    doc["options"]["transport"] = options_.transport;
    if (options_.format == OutputFormat::kJson) std::cout << doc.dump(2) << std::endl;
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

int RunPreflight(const PreflightContext& ctx, const std::vector<std::string>& args) {
  try {
    PreflightOptions options = ParsePreflightArgs(args, ctx.world_size);
    if (options.help) {
      if (ctx.rank == 0) std::cout << PreflightUsage() << std::endl;
      return kExitPass;
    }
    const std::string backend = core::ResolveBackend(options.backend);
    CheckBackendFlags(options, backend);
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
