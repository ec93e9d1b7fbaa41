#include "launcher/job/job_agent.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "core/error.h"
#include "core/exit_codes.h"
#include "launcher/builtins.h"
#include "launcher/nccl_log/parser.h"
#include "launcher/nccl_log/report.h"
#include "launcher/python/python_launch.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

void MakeDirs(const std::string& path, const char* what) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec || ::access(path.c_str(), W_OK) != 0) {
    throw UsageError(std::string("cannot use ") + what + " '" + path +
                     "': " + (ec ? ec.message() : std::strerror(errno)));
  }
}

SupervisorOptions SupervisorOptionsOf(const LaunchOptions& o) {
  SupervisorOptions so;
  so.grace_period = o.grace_period;
  so.quiet = o.quiet;
  so.console_ranks = {o.ranks_filter.begin(), o.ranks_filter.end()};
  return so;
}

}  // namespace

void CreateRunDirectories(const JobPlan& plan) {
  MakeDirs(plan.options().log_dir, "--log-dir");
  MakeDirs(plan.run_dir(), "run directory");
  for (const auto& slot : plan.ranks()) MakeDirs(slot.dir, "rank directory");
}

JobAgent::JobAgent(const JobPlan& plan, NodeRole* role, std::string host,
                   std::vector<RankPlacement> placement)
    : plan_(plan), role_(role), host_(std::move(host)), placement_(std::move(placement)) {}

int JobAgent::Run(ProcessSpawner* spawner) {
  Supervisor supervisor(spawner, SupervisorOptionsOf(plan_.options()));
  if (!role_->Open(plan_, &supervisor)) return kExitRankFailed;
  supervisor.on_tick = [this] { role_->OnTick(); };

  const LaunchOptions& o = plan_.options();
  const int world = plan_.world_size();
  std::cerr << "dlaunch: " << world << " rank" << (world > 1 ? "s" : "");
  if (plan_.multi_node()) {
    std::cerr << " on " << o.nnodes << " nodes (this is node " << o.node_rank << ")";
  }
  std::cerr << ", run directory " << plan_.run_dir() << std::endl;

  SummaryInfo summary;
  summary.run_id = plan_.identity().run_id;
  summary.host = host_;
  SummaryWriter summary_file(plan_.summary_path());
  AttemptReport report;
  for (int attempt = 0;; ++attempt) {
    supervisor.on_change = [&, attempt](const AttemptResult& now) {
      summary_file.WriteProgress(summary, attempt, now);
    };
    std::vector<RankSpec> specs;
    for (const auto& slot : plan_.ranks()) {
      python::ClearAttemptFiles(slot.dir);
      ProcessSpec process;
      process.argv = plan_.argv();
      process.env = plan_.RankEnvironment(slot, attempt);
      // A forwarded SIGUSR1 must not end a built-in rank that is still loading.
      if (o.command == Command::kTrain || o.command == Command::kPreflight) {
        process.ignored_signals = {SIGUSR1, SIGUSR2};
      }
      if (slot.local_rank < static_cast<int>(placement_.size()))
        ApplyPlacement(placement_[slot.local_rank], &process);
      specs.push_back(RankSpec{slot.rank, slot.local_rank, std::move(process), slot.dir});
    }
    report = Judge(attempt, supervisor.Run(specs));
    summary.truncated_logs = report.result.truncated_logs;
    role_->Conclude(&report, &summary);
    summary.restarts = attempt;
    summary.exit_code = report.exit_code;
    summary.error = report.error;
    summary_file.Write(summary, report.result.ranks);
    role_->Explain(report);

    if (!plan_.ShouldRestart(attempt, report.exit_code, report.result.interrupted_by != 0,
                             report.result.stop_code.has_value())) {
      break;
    }
    std::cerr << "dlaunch: restarting all ranks (restart " << attempt + 1 << " of "
              << o.max_restarts << ")" << std::endl;
    role_->Reset();
  }
  if (o.command == Command::kPreflight && plan_.hosts_coordinator()) {
    // Beside preflight's bandwidth tables: which transport each rank pair used, from nccl.log.
    std::cout << nccl_log::FormatPreflightSection(
                     nccl_log::Analyze(nccl_log::ParseRankDirs(plan_.run_dir())))
              << std::flush;
  }
  role_->Close(report);
  return report.exit_code;
}

AttemptReport JobAgent::Judge(int attempt, AttemptResult result) {
  AttemptReport report;
  report.attempt = attempt;
  report.result = std::move(result);
  const AttemptResult& r = report.result;
  if (r.interrupted_by) {
    report.exit_code = 128 + r.interrupted_by;
    report.error = "interrupted by " + SignalName(r.interrupted_by);
    std::cerr << "dlaunch: " << report.error << "; ranks stopped" << std::endl;
  } else if (r.stop_code) {
    report.exit_code = *r.stop_code;
    report.error = r.stop_reason;
    std::cerr << "dlaunch: " << r.stop_reason << std::endl;
  } else if (r.first_failure) {
    const RankOutcome& f = r.ranks[role_->RootCause(r)];
    const Command c = plan_.options().command;
    const bool builtin = c == Command::kTrain || c == Command::kPreflight;
    // A built-in that failed on purpose (a preflight FAIL) prints its verdict, not a crash report.
    const std::string verdict =
        builtin ? BuiltinFailureReport(plan_.options(), f, plan_.run_dir()) : "";
    if (!verdict.empty()) {
      std::cerr << verdict;
      report.error = "preflight verdict FAIL";
      report.verdict = true;
    } else {
      const std::string extra = role_->RankError(f.rank);
      std::cerr << FormatRootCause(f, host_, plan_.ranks()[f.local_rank].dir, extra);
      report.error = "rank " + std::to_string(f.rank) + " failed: " + DescribeExit(f) +
                     (extra.empty() ? "" : "; " + extra);
    }
    report.exit_code = builtin ? BuiltinExitCode(f) : kExitRankFailed;
  }
  return report;
}

}  // namespace dlaunch::launcher
