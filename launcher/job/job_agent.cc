#include "launcher/job/job_agent.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>

#include "core/base/clock.h"
#include "core/base/files.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "core/run_dir/attempts.h"
#include "core/run_dir/paths.h"
#include "launcher/job/agent_watch.h"
#include "launcher/job/events_listener.h"
#include "launcher/job/file_timer_listener.h"
#include "launcher/job/leftovers_listener.h"
#include "launcher/job/report.h"

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

SupervisorOptions SupervisorOptionsOf(const LaunchOptions& o, const RankProgram& program) {
  SupervisorOptions so;
  so.grace_period = o.grace_period;
  so.quiet = o.quiet;
  so.console_ranks = {o.ranks_filter.begin(), o.ranks_filter.end()};
  so.console_local_ranks = {o.local_ranks_filter.begin(), o.local_ranks_filter.end()};
  for (int local = 0; local < o.nproc; ++local) {
    // torchrun's -r keeps a stream off the console; -t brings it back.
    if (const int off = o.redirects.For(local) & ~o.tee.For(local)) so.off_console[local] = off;
  }
  so.stdout_filters = o.stdout_filters;
  so.stderr_filters = o.stderr_filters;
  if (program.PrintsDocument()) so.document_rank = 0;
  return so;
}

}  // namespace

namespace {

void MakeRankDirs(const JobPlan& plan) {
  for (const auto& slot : plan.ranks()) MakeDirs(slot.dir, "rank directory");
}

// Puts the attempt's files away into `folder`. Node 0 moves them all; a joining node, which may
// share the folder with node 0 on one machine, only its own.
std::string PutAway(const JobPlan& plan, const std::string& folder, bool whole_run) {
  std::vector<std::string> own;
  if (!plan.hosts_coordinator()) {
    for (const auto& slot : plan.ranks()) own.push_back(rundir::FileName(slot.dir));
    own.push_back(rundir::FileName(plan.summary_path()));
  }
  return rundir::PutAttemptAway(plan.run_dir(), folder, whole_run, own);
}

}  // namespace

JobPlan CreateRunDirectories(JobPlan plan) {
  MakeDirs(plan.options().log_dir, "--log-dir");
  MakeDirs(plan.run_dir(), "run directory");
  // A run id used before (pytorch/examples' --rdzv_id=101): the old run moves aside whole, so
  // no file of it mixes with this run's. A joining node puts away only its own copies, since
  // node 0 may share the folder.
  std::string moved;
  try {
    moved = PutAway(plan, "", plan.hosts_coordinator());
  } catch (const Error& e) {
    throw UsageError(std::string("cannot use run directory: ") + e.what());
  }
  if (!moved.empty()) {
    std::cerr << "dlaunch: " << plan.run_dir() << " held an earlier run: moved it into " << moved
              << "/" << std::endl;
  }
  if (plan.hosts_coordinator()) {
    Membership first = plan.membership();
    first.attempt_folder =
        rundir::RunDir::AttemptDirName(rundir::NextAttemptNumber(plan.run_dir()));
    plan.SetMembership(first);
  }
  MakeRankDirs(plan);
  return plan;
}

JobAgent::JobAgent(JobPlan plan, NodeRole* role, std::string host,
                   std::vector<RankPlacement> placement)
    : plan_(std::move(plan)),
      role_(role),
      host_(std::move(host)),
      placement_(std::move(placement)) {}

int JobAgent::EndBeforeStart(const AttemptReport& report) {
  // Node 0's summary says why the job never started; a joining node's only when a signal ended
  // it (a node that came too late ran nothing, node 0's summary is the job's).
  if (plan_.hosts_coordinator() || report.result.interrupted_by) {
    SummaryInfo summary;
    summary.run_id = plan_.identity().run_id;
    summary.host = host_;
    summary.exit_code = report.exit_code;
    summary.error = report.error;
    SummaryWriter(plan_.summary_path()).Write(summary, {});
  }
  role_->Close(report);
  return report.exit_code;
}

std::optional<int> JobAgent::Open(Supervisor* supervisor, InterruptWatch* watch) {
  const bool opened = !role_->ended() && role_->Open(&plan_, supervisor);
  if (watch) watch->Stop();
  if (role_->ended()) return EndBeforeStart(*role_->ended());
  if (const int signal = watch ? watch->signal() : 0) {
    // It came while nothing waited (or as the rendezvous closed): no rank starts either way.
    AttemptReport interrupted;
    MarkInterrupted(&interrupted, signal, "before the ranks started");
    std::cerr << "dlaunch: " << interrupted.error << std::endl;
    return EndBeforeStart(interrupted);
  }
  if (!opened) return kExitRankFailed;
  return std::nullopt;
}

std::vector<std::unique_ptr<AttemptListener>> JobAgent::SideDuties(const Supervisor* supervisor) {
  std::vector<std::unique_ptr<AttemptListener>> duties;
  // torchrun's FileTimer server for this node's ranks, their FIFO in TORCHELASTIC_TIMER_FILE.
  if (FileTimerWanted()) duties.push_back(std::make_unique<FileTimerListener>(supervisor));
  duties.push_back(std::make_unique<LeftoversListener>(&plan_));
  if (plan_.expects_agent()) duties.push_back(std::make_unique<AgentWatchListener>(&plan_));
  // --events-file: node 0 tells the job's story; the other nodes' ranks reach it as node events.
  if (!plan_.options().events_file.empty() && plan_.hosts_coordinator()) {
    events_ = std::make_unique<JobEventLog>(plan_.options().events_file, plan_.identity().run_id);
    role_->SetEventLog(events_.get());
    duties.push_back(std::make_unique<EventsListener>(events_.get(), host_));
  }
  return duties;
}

void JobAgent::Announce() const {
  const Membership& m = plan_.membership();
  const int world = plan_.world_size();
  std::cerr << "dlaunch: " << world << " rank" << (world > 1 ? "s" : "");
  if (plan_.multi_node()) {
    std::cerr << " on " << m.nnodes << " node" << (m.nnodes > 1 ? "s" : "") << " (this is node "
              << m.node_rank << ")";
  }
  if (m.attempt > 0) std::cerr << ", attempt " << m.attempt;
  std::cerr << ", run directory " << plan_.run_dir() << std::endl;
}

int JobAgent::Run(ProcessSpawner* spawner, InterruptWatch* watch) {
  Supervisor supervisor(spawner, SupervisorOptionsOf(plan_.options(), plan_.program()));
  if (const std::optional<int> ended = Open(&supervisor, watch)) return *ended;
  const std::vector<std::unique_ptr<AttemptListener>> duties = SideDuties(&supervisor);
  SummaryListener summary(&plan_, role_, host_);
  AttemptListeners listeners;
  for (const auto& duty : duties) listeners.Add(duty.get());
  listeners.Add(&summary);
  Announce();

  AttemptReport report;
  for (bool again = true; again;) {
    const Membership m = plan_.membership();
    listeners.AttemptStart(m);
    report = Judge(m.attempt, RunAttempt(&supervisor, &listeners, m));
    role_->Conclude(&report, summary.info());
    summary.EndAttempt(&report);
    role_->Explain(report);
    again = NextAttempt(m, watch, &report, &summary, &listeners);
  }
  if (summary.attempts().size() > 1 && plan_.hosts_coordinator()) {
    std::cerr << FormatAttemptStory(summary.attempts()) << std::flush;
  }
  if (plan_.hosts_coordinator()) plan_.program().AfterJob(plan_.run_dir());
  role_->Close(report);
  return report.exit_code;
}

AttemptResult JobAgent::RunAttempt(Supervisor* supervisor, AttemptListeners* listeners,
                                   const Membership& m) {
  supervisor->on_change = [this, listeners](const AttemptResult& now) {
    listeners->RankChange(now);
    role_->OnRankChange();
  };
  supervisor->on_tick = [this, listeners] {
    role_->OnTick();
    listeners->Tick();
  };
  std::vector<RankSpec> specs;
  for (const auto& slot : plan_.ranks()) specs.push_back(RankSpecOf(slot, m, listeners));
  AttemptResult result = supervisor->Run(specs);
  listeners->RanksGone(&result);
  return result;
}

RankSpec JobAgent::RankSpecOf(const RankSlot& slot, const Membership& m,
                              AttemptListeners* listeners) const {
  plan_.program().BeforeAttempt(slot.dir);
  ProcessSpec process;
  process.argv = plan_.argv();
  process.env = plan_.RankEnvironment(slot, m.restart_count);
  // Counts elastic changes of membership too, which TORCHELASTIC_RESTART_COUNT does not: `train`
  // resumes from its checkpoint on any attempt after the first.
  process.env.push_back("DLAUNCH_ATTEMPT=" + std::to_string(m.attempt));
  listeners->RankProcess(&process);
  plan_.program().ShapeProcess(&process);  // its ignored signals, the agent's pipe
  if (slot.local_rank < static_cast<int>(placement_.size())) {
    ApplyPlacement(placement_[slot.local_rank], &process);
  }
  return RankSpec{slot.rank, slot.local_rank, std::move(process), slot.dir,
                  plan_.ConsolePrefix(slot, host_)};
}

bool JobAgent::NextAttempt(const Membership& m, InterruptWatch* watch, AttemptReport* report,
                           SummaryListener* summary, AttemptListeners* listeners) {
  std::string how;
  if (watch) watch->Start();  // the next node rendezvous ends on a signal too
  bool again = role_->Next(report, &plan_, &how, [&] {
    // Before the next attempt writes a line: its logs start in fresh folders.
    summary->current()->folder = PutAway(plan_, m.attempt_folder, false);
  });
  if (watch) watch->Stop();
  if (const int signal = watch ? watch->signal() : 0; again && signal) {
    MarkInterrupted(report, signal, "before the next attempt started");
    std::cerr << "dlaunch: " << report->error << std::endl;
    again = false;
  }
  if (!again) {
    listeners->JobEnd(*report);
    return false;
  }
  listeners->Restart(plan_.membership(), how, *report);
  MakeRankDirs(plan_);
  Announce();
  return true;
}

AttemptReport JobAgent::Judge(int attempt, AttemptResult result) {
  AttemptReport report;
  report.attempt = attempt;
  report.result = std::move(result);
  const AttemptResult& r = report.result;
  // A stop for a failure elsewhere (node 0's abort, another node's failure) that came while this
  // node tore its ranks down after one of them had failed by itself: that rank's failure is this
  // node's story, as it is when the stop comes after the teardown. Which came first across nodes
  // is node 0's choice (RootCause), from every node's ranks and end times. A hang's stop is its
  // own verdict.
  const bool own_failure_first = r.first_failure && r.stop_code && *r.stop_code == kExitRankFailed;
  if (r.interrupted_by) {
    report.exit_code = 128 + r.interrupted_by;
    report.error = "interrupted by " + SignalName(r.interrupted_by);
    std::cerr << "dlaunch: " << report.error << "; ranks stopped" << std::endl;
  } else if (r.stop_code && !own_failure_first) {
    report.exit_code = *r.stop_code;
    report.error = r.stop_reason;
    std::cerr << "dlaunch: " << r.stop_reason << std::endl;
  } else if (r.first_failure) {
    const RankProgram& program = plan_.program();
    std::string elsewhere;
    const std::optional<size_t> root = role_->RootCause(r, &elsewhere);
    if (!root && !program.ExitSaysVerdict()) {
      // Another node's rank failed first: node 0's diagnosis prints its block (Explain). A
      // program whose rank's exit says the verdict (a built-in's 3 hang, 4 unhealthy) keeps its
      // own rank's report.
      std::cerr << "dlaunch: " << elsewhere << std::endl;
      report.error = elsewhere;
      report.exit_code = kExitRankFailed;
      return report;
    }
    const RankOutcome& f = r.ranks[root.value_or(*r.first_failure)];
    // A rank that failed on purpose (a preflight FAIL) prints its verdict, not a crash report.
    if (const auto verdict = program.FailureVerdict(f, plan_.run_dir())) {
      std::cerr << verdict->report;
      report.error = verdict->error;
      report.verdict = true;
    } else {
      std::string extra = role_->RankError(f.rank);
      if (!f.cause.empty()) extra = extra.empty() ? f.cause : f.cause + "; " + extra;
      // Which node, beside the host: several nodes of one job may share a host name.
      const std::string where =
          plan_.multi_node()
              ? host_ + " (node " + std::to_string(plan_.membership().node_rank) + ")"
              : host_;
      std::cerr << FormatRootCause(f, where, plan_.ranks()[f.local_rank].dir, extra);
      report.root_cause_printed = true;
      report.error = "rank " + std::to_string(f.rank) +
                     " failed: " + DescribeFailure(f, plan_.ranks()[f.local_rank].dir) +
                     (extra.empty() ? "" : "; " + extra);
    }
    report.exit_code = program.ExitCode(f);
  }
  return report;
}

}  // namespace dlaunch::launcher
