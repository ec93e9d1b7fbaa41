// The coordinator as node 0's launcher hosts it (single-node and coordinator-host roles): the
// service, the notices it turns into stops and rank errors, and the hang monitor over the job.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "launcher/diagnose/hang_monitor.h"
#include "launcher/job/dump_service.h"
#include "launcher/job/job_event_log.h"
#include "launcher/job/job_plan.h"
#include "launcher/job/straggler_watch.h"
#include "launcher/live/live_job.h"
#include "launcher/live/live_status.h"
#include "launcher/live/metrics_server.h"
#include "launcher/rendezvous/coordinator.h"
#include "launcher/supervision/supervisor.h"

namespace dlaunch::launcher {

class HostedCoordinator : public CoordinatorListener {
 public:
  // Starts serving on `listen` ("127.0.0.1:0": a free loopback port). Throws UsageError when it
  // cannot listen there.
  HostedCoordinator(CoordinatorConfig config, const std::string& listen, const core::TlsFiles& tls);
  ~HostedCoordinator() override;

  int port() const { return server_->port(); }
  // --metrics-port: serves /metrics, /healthz and the live report page on `addr`:`port` from now on
  // (0: a free port, said on stderr). Throws Error(kInvalidArgument) when it cannot listen there;
  // call before any rank starts.
  void ServeMetrics(const std::string& addr, int port);
  // Refreshes the live view now (a rank exited): on the supervisor's loop, as Tick.
  void RefreshLive() { UpdateLive(true); }
  CoordinatorHandler& handler() { return handler_; }

  // From now on notices stop `supervisor`, the hang monitor watches every rank of `plan` (none
  // with --hang-timeout 0) and dump requests (dlaunch dump) are answered.
  void Watch(const JobPlan& plan, Supervisor* supervisor);
  // On the supervisor's tick: a diagnosed hang is printed and stops the attempt (exit code 3); a
  // new dump request starts its dump.
  void Tick();
  bool hang_diagnosed() const { return hang_diagnosed_; }
  // Job events (hang, straggler, node lost) also go to `log` (may be null; outlives this).
  void SetEventLog(JobEventLog* log) { events_ = log; }
  // Every straggler verdict of the job so far, active and ended, for summary.json; and a count
  // that moves whenever one starts or ends. Call on the supervisor's thread, as Tick.
  std::vector<rundir::StragglerVerdict> Stragglers() const;
  int straggler_generation() const {
    return past_generations_ + (straggler_ ? straggler_->generation() : 0);
  }
  int attempt() const { return attempt_; }  // the attempt Watch was last given
  // The first error, timeout, oom or nan rank `rank` reported in this attempt ("kind: message"),
  // after the mismatch RootCause found it at fault for, if any.
  std::string RankError(int rank);
  // The index in `result.ranks` of the root cause of a failed attempt, chosen as the diagnosis
  // chooses over the run directory's files, these exits and the other nodes' last word on theirs
  // (the culprit of a mismatch across the flight recorders, else PickRootCause), so the
  // root-cause block and the diagnosis name the same rank. nullopt when it chose another node's
  // rank (`elsewhere`: "node 1 (host) failed: ..."); `result.first_failure` when it chose none.
  std::optional<size_t> RootCause(const AttemptResult& result, std::string* elsewhere);
  // The global rank the last RootCause of this attempt chose, on whichever node; -1 before one.
  // Thread-safe.
  int root_cause_rank() const { return root_cause_rank_; }
  // Forgets the attempt: registrations, store, errors, the monitor's clocks.
  void Reset();
  // Blocks until in-flight calls end (at most 500 ms).
  void Shutdown();

  void OnRankEvent(const v1::Event& event) override;
  void OnRendezvousTimeout(const std::string& message) override;
  void OnNodeFault(const NodeFault& fault) override;

 private:
  CoordinatorHandler handler_;
  std::unique_ptr<CoordinatorServer> server_;
  std::mutex mu_;
  Supervisor* supervisor_ = nullptr;
  std::string run_dir_;
  int world_size_ = 0;
  int attempt_ = 0;
  std::map<int, std::string> rank_errors_;
  // RootCause's choice, with `*rank` set to the chosen global rank (-1: none).
  std::optional<size_t> FindRootCause(const AttemptResult& result, std::string* elsewhere,
                                      int* rank);
  std::atomic<int> root_cause_rank_{-1};
  std::map<int, std::string> root_mismatch_;  // rank -> the mismatch RootCause named it for
  std::shared_ptr<LiveJobView> view_;
  std::unique_ptr<HangMonitor> monitor_;
  std::unique_ptr<DumpService> dumps_;  // declared after view_: goes first
  bool hang_diagnosed_ = false;
  bool trimmed_ = false;  // the rank rendezvous' memory went back to the system
  std::unique_ptr<StragglerWatch> straggler_;              // none with --straggler-threshold 0
  std::vector<rundir::StragglerVerdict> past_stragglers_;  // of earlier memberships
  int past_generations_ = 0;
  JobEventLog* events_ = nullptr;

  // The live view (dlaunch status, /metrics): refreshed on Tick, read on other threads.
  void UpdateLive(bool now);
  void WriteLiveFile();
  std::string host_;          // this host's name, as status and live.json give it
  std::string endpoint_;      // where `dlaunch status` reaches the coordinator
  std::string status_token_;  // admits GetStatus only; in live.json
  std::string live_file_;     // live.json once written
  std::string run_id_;
  int64_t start_unix_ms_ = 0;
  int64_t live_unix_ms_ = 0;  // of the last UpdateLive
  // How often live.json is rewritten for native ranks (their heartbeat interval); every 200 ms
  // once a rank said it runs the Python agent.
  int64_t native_live_every_ms_ = 200;
  int restarts_ = 0;
  int nnodes_ = 1;
  std::string hang_headline_;
  std::string failure_;  // under mu_
  std::unique_ptr<LiveStatus> live_;
  std::unique_ptr<MetricsServer> metrics_;  // declared after live_: goes first
};

}  // namespace dlaunch::launcher
