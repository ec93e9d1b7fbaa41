#include "launcher/job/hosted_coordinator.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/base/clock.h"
#include "core/base/files.h"
#include "core/base/proc.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "core/run_dir/events_file.h"
#include "core/run_dir/live_file.h"
#include "core/run_dir/paths.h"
#include "core/runtime.h"
#include "launcher/diagnose/diagnose.h"
#include "launcher/diagnose/rank_facts.h"
#include "launcher/diagnose/run_snapshot.h"
#include "launcher/job/report.h"

namespace dlaunch::launcher {

HostedCoordinator::HostedCoordinator(CoordinatorConfig config, const std::string& listen,
                                     const core::TlsFiles& tls)
    : handler_(std::move(config)), live_(std::make_unique<LiveStatus>()) {
  handler_.SetListener(this);
  server_ = std::make_unique<CoordinatorServer>(&handler_, listen, tls);
  start_unix_ms_ = base::UnixMillis();
  run_id_ = handler_.config().run_id;
  host_ = base::Hostname();
  // A coordinator on every interface is reached by this host's name; one on loopback there.
  const std::string host = listen.substr(0, listen.rfind(':'));
  endpoint_ = (host == "0.0.0.0" || host.empty() ? host_ : host) + ":" + std::to_string(port());
  status_token_ = NewNodeCredential();
  handler_.SetStatusSource(status_token_, [live = live_.get()] { return live->Json(); });
}

HostedCoordinator::~HostedCoordinator() {
  dumps_.reset();
  metrics_.reset();
  Shutdown();
  handler_.SetListener(nullptr);
  // The job is over: nobody is to be pointed at its coordinator any more.
  if (!live_file_.empty()) ::unlink(live_file_.c_str());
}

void HostedCoordinator::ServeMetrics(const std::string& addr, int port) {
  metrics_ = std::make_unique<MetricsServer>(live_.get(), addr, port, handler_.config().run_dir);
  std::cerr << "dlaunch: metrics on http://" << addr << ":" << metrics_->port()
            << "/metrics (and /healthz; the live report page at /)" << std::endl;
}

void HostedCoordinator::WriteLiveFile() {
  if (run_dir_.empty() || !live_file_.empty()) return;
  rundir::LiveEndpoint e;
  e.endpoint = endpoint_;
  e.status_token = status_token_;
  e.host = host_;
  e.pid = ::getpid();
  e.unix_ms = base::UnixMillis();
  const std::string path = rundir::RunDir(run_dir_).live();
  try {
    rundir::WriteLiveEndpoint(path, e);
    live_file_ = path;
  } catch (const Error& err) {
    std::cerr << "dlaunch: warning: dlaunch status will not find this job: " << err.what()
              << std::endl;
  }
}

void HostedCoordinator::UpdateLive(bool now) {
  // Heartbeats come every 200 ms (Python) or every heartbeat interval (native, 1 s by default):
  // a fresher view finds nothing new, and costs a pass over every rank.
  const int64_t t = base::UnixMillis();
  if (!view_) return;
  const int64_t every = view_->agents_seen() ? 200 : native_live_every_ms_;
  if (!now && t - live_unix_ms_ < every) return;
  live_unix_ms_ = t;
  LiveJobFacts f;
  f.run_id = run_id_;
  f.run_dir = run_dir_;
  f.local_host = host_;
  f.attempt = attempt_;
  f.restarts = restarts_;
  f.world_size = world_size_;
  f.nodes = nnodes_;
  f.start_unix_ms = start_unix_ms_;
  f.hang = hang_headline_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    f.failure = failure_;
  }
  f.stragglers = Stragglers();
  if (straggler_) f.scores = straggler_->detector().Scores();
  live_->Update(view_->Ranks(), handler_.Nodes(), f, t);
}

void HostedCoordinator::Watch(const JobPlan& plan, Supervisor* supervisor) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    supervisor_ = supervisor;
    run_dir_ = plan.run_dir();
    world_size_ = plan.world_size();
    attempt_ = plan.membership().attempt;
    failure_.clear();
  }
  restarts_ = plan.membership().restart_count;
  nnodes_ = plan.membership().nnodes;
  if (!plan.identity().run_id.empty()) run_id_ = plan.identity().run_id;
  live_->Reset();
  // A dump in progress ends with the attempt it dumps.
  dumps_.reset();
  // The verdicts of an earlier membership stay in the job's record; the new one (its world size
  // may differ) starts its windows afresh.
  if (straggler_) {
    straggler_->Reset(base::UnixMillis());
    const auto& old = straggler_->detector().Verdicts();
    past_stragglers_.insert(past_stragglers_.end(), old.begin(), old.end());
    past_generations_ += straggler_->generation() + 1;
    straggler_.reset();
  }
  monitor_.reset();
  native_live_every_ms_ = std::max<int64_t>(200, plan.options().heartbeat_interval.count());
  view_ = std::make_shared<LiveJobView>(&handler_, supervisor, plan.world_size(), plan.run_dir());
  LiveDumpOptions dump;
  dump.attempt = plan.membership().attempt;
  dumps_ = std::make_unique<DumpService>(view_, dump);
  // Node 0 names the rank that makes the others wait, unless --straggler-threshold 0.
  if (plan.options().straggler_threshold > 0) {
    StragglerOptions so;
    so.threshold = plan.options().straggler_threshold;
    so.window_steps = plan.options().straggler_window;
    straggler_ = std::make_unique<StragglerWatch>(
        view_.get(), &handler_, plan.world_size(), host_, so,
        [this](const StragglerDetector::Change& c) {
          if (!events_) return;
          rundir::JobEvent e;
          e.kind = c.started ? rundir::JobEventKind::kStragglerStart
                             : rundir::JobEventKind::kStragglerEnd;
          e.rank = c.verdict.rank;
          e.host = c.verdict.host;
          e.message = c.verdict.text;
          events_->Emit(std::move(e));
        });
    view_->SetStragglers(Stragglers());
  }
  WriteLiveFile();
  UpdateLive(true);
  // Node 0 watches every rank for stalls (heartbeats and collectives of native and Python ranks,
  // the output of the others with --hang-on-silence), unless --hang-timeout 0 turned that off.
  if (plan.options().hang_timeout.count() <= 0) return;
  HangMonitor::Options ho;
  ho.hang_timeout = plan.options().hang_timeout;
  ho.silence_is_hang = plan.options().hang_on_silence;
  ho.heartbeat_timeout = plan.options().heartbeat_timeout;
  // The heartbeats a collective stall is judged from are up to one interval old.
  ho.stall_confirm = 2 * plan.options().heartbeat_interval;
  monitor_ = std::make_unique<HangMonitor>(*view_, ho);
}

std::vector<rundir::StragglerVerdict> HostedCoordinator::Stragglers() const {
  std::vector<rundir::StragglerVerdict> all = past_stragglers_;
  if (straggler_) {
    const auto& now = straggler_->detector().Verdicts();
    all.insert(all.end(), now.begin(), now.end());
  }
  return all;
}

void HostedCoordinator::Tick() {
  if (!trimmed_ && handler_.AllRegistered()) {
    // Every rank's Register held a server thread, and the heap keeps what they freed: a tick
    // later they are gone, and that memory goes back (a third of node 0's heap at 256 ranks).
    ::malloc_trim(0);
    trimmed_ = true;
  }
  if (dumps_ && !hang_diagnosed_) dumps_->Poll();
  if (straggler_ && !hang_diagnosed_) {
    const int before = straggler_->generation();
    straggler_->Poll(base::UnixMillis());
    // The hang monitor and a live dump (on its own thread) read them through the view.
    if (straggler_->generation() != before) view_->SetStragglers(Stragglers());
  }
  UpdateLive(false);
  if (!monitor_) return;
  if (auto d = monitor_->Poll(base::UnixMillis())) {
    hang_diagnosed_ = true;
    hang_headline_ = d->headline;
    if (events_) {
      rundir::JobEvent e;
      e.kind = rundir::JobEventKind::kHang;
      e.message = d->headline;
      events_->Emit(std::move(e));
    }
    std::cerr << FormatDiagnosis(*d) << std::flush;
    // A rank found stopped or silent has had its stacks taken: a SIGTERM and the grace period
    // would only hold the teardown.
    std::vector<int> kill_now;
    for (const auto& r : d->ranks) {
      if (r.stopped || r.state == rundir::RankState::kStopped ||
          r.state == rundir::RankState::kUnresponsive || !r.stack_top.empty()) {
        kill_now.push_back(r.rank);
      }
    }
    supervisor_->RequestStop(kExitHang, d->headline, std::move(kill_now));
    UpdateLive(true);
  }
}

std::string HostedCoordinator::RankError(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rank_errors_.find(rank);
  const std::string error = it == rank_errors_.end() ? "" : it->second;
  auto mismatch = root_mismatch_.find(rank);
  if (mismatch == root_mismatch_.end()) return error;
  return mismatch->second + (error.empty() ? "" : "; " + error);
}

std::optional<size_t> HostedCoordinator::RootCause(const AttemptResult& result,
                                                   std::string* elsewhere) {
  int rank = -1;
  const std::optional<size_t> local = FindRootCause(result, elsewhere, &rank);
  if (local && *local < result.ranks.size()) rank = result.ranks[*local].rank;
  root_cause_rank_ = rank;
  return local;
}

std::optional<size_t> HostedCoordinator::FindRootCause(const AttemptResult& result,
                                                       std::string* elsewhere, int* rank) {
  {
    // Asked only of an attempt that failed: /healthz says so from now on.
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.empty()) failure_ = "a rank failed";
  }
  const size_t fallback = result.first_failure.value_or(0);
  if (run_dir_.empty()) return fallback;
  RunSnapshot run;
  try {
    run = LoadRunDirForLauncher(run_dir_, world_size_);
  } catch (const Error&) {
    return fallback;
  }
  // This attempt's exits, as summary.json will record them once the attempt is judged.
  std::map<int, size_t> index;
  for (size_t i = 0; i < result.ranks.size(); ++i) {
    const RankOutcome& o = result.ranks[i];
    if (o.rank < 0 || o.rank >= static_cast<int>(run.ranks.size())) continue;
    index[o.rank] = i;
    run.ranks[o.rank].summary = SummaryOfLocalRank(o);
  }
  // The other nodes' ranks, as their nodes reported them in this attempt: a rank their teardown
  // ended is no candidate, and the end times order the failures across nodes.
  std::map<int, const NodeView*> node_of;
  const std::vector<NodeView> nodes = handler_.Nodes();
  for (const NodeView& n : nodes) {
    if (n.node_rank == 0 || !n.status || n.status->attempt() != attempt_) continue;
    for (const v1::RankExit& x : n.status->ranks()) {
      if (x.rank() < 0 || x.rank() >= static_cast<int>(run.ranks.size()) || index.count(x.rank()))
        continue;
      run.ranks[x.rank()].summary = SummaryOfRemoteRank(n, x);
      node_of[x.rank()] = &n;
    }
  }
  auto on_other_node = [&](int rank, const std::string& why) {
    const NodeView& n = *node_of.at(rank);
    *elsewhere = "node " + std::to_string(n.node_rank) + " (" + n.host + ") failed: " + why;
  };
  // The diagnosis' facts, with its default options: offline "now" (each rank's own latest
  // record), as summary.json's diagnosis judges the finished attempt, and no enrichers, which
  // that diagnosis does not use either.
  const std::vector<RankFacts> facts = GatherRunFacts(run, FactsOptions{});
  // A rank whose collective differs from the others' is at fault, whichever rank that made fail
  // first: Gloo aborts the rank that received more bytes than it expected, not the sender.
  const Diagnosis verdict = Analyze(run, facts);
  if (verdict.kind == rundir::DiagnosisKind::kMismatch) {
    for (int culprit : verdict.culprit_ranks) {
      if (auto it = index.find(culprit); it != index.end()) {
        std::lock_guard<std::mutex> lock(mu_);
        root_mismatch_[culprit] = verdict.headline;
        return it->second;
      }
      if (node_of.count(culprit)) {
        *rank = culprit;
        on_other_node(culprit, verdict.headline);
        return std::nullopt;
      }
    }
  }
  int root = PickRootCause(facts);
  // No rank failed by itself, and a watchdog fired: the hang is the verdict (a built-in's exit 3).
  if (root < 0) root = FirstWatchdogExit(facts);
  if (auto it = index.find(root); it != index.end()) return it->second;
  auto remote = node_of.find(root);
  if (remote == node_of.end()) return fallback;
  *rank = root;
  const std::string& message = remote->second->status->message();
  on_other_node(root, message.empty() ? "rank " + std::to_string(root) + " failed" : message);
  return std::nullopt;
}

void HostedCoordinator::Reset() {
  handler_.Reset();
  trimmed_ = false;
  if (monitor_) monitor_->Reset();
  hang_diagnosed_ = false;
  root_cause_rank_ = -1;
  hang_headline_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  rank_errors_.clear();
  root_mismatch_.clear();
}

void HostedCoordinator::Shutdown() {
  if (server_) server_->Shutdown();
}

void HostedCoordinator::OnRankEvent(const v1::Event& event) {
  const auto kind = static_cast<core::EventKind>(event.kind());
  if (kind != core::EventKind::kError && kind != core::EventKind::kTimeout &&
      kind != core::EventKind::kOom && kind != core::EventKind::kNan) {
    return;
  }
  auto body = nlohmann::json::parse(event.json(), nullptr, false);
  const std::string name = core::EventKindName(kind);
  std::string message = body.is_object() ? body.value("message", name) : event.json();
  std::lock_guard<std::mutex> lock(mu_);
  rank_errors_.emplace(event.rank(), name + ": " + message);
}

void HostedCoordinator::OnRendezvousTimeout(const std::string& message) {
  std::cerr << "dlaunch: " << message << std::endl;
}

void HostedCoordinator::OnNodeFault(const NodeFault& fault) {
  Supervisor* supervisor;
  {
    std::lock_guard<std::mutex> lock(mu_);
    supervisor = supervisor_;
  }
  if (events_ && fault.kind != NodeFaultKind::kFailed) {
    rundir::JobEvent e;
    e.kind = rundir::JobEventKind::kNodeLost;
    e.node_rank = fault.node_rank;
    e.host = fault.host;
    e.message = fault.message;
    events_->Emit(std::move(e));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.empty()) failure_ = fault.message;
  }
  if (supervisor) supervisor->RequestStop(kExitRankFailed, fault.message);
}

}  // namespace dlaunch::launcher
