// One object per node role: the single node, node 0 hosting the coordinator for other nodes, and
// a node joining it. The job agent runs the attempts; the role does what differs between nodes.
// The roles live in files of their own (node_zero_role: what node 0 does alone or with others;
// single_node_role, coordinator_host_role, joining_node_role); this file holds their interface,
// what they share, and MakeNodeRole, the one place that picks the role.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "launcher/job/job_event_log.h"
#include "launcher/job/job_plan.h"
#include "launcher/job/report.h"
#include "launcher/job/restart_policy.h"
#include "launcher/supervision/supervisor.h"

namespace dlaunch::launcher {

// What an attempt came to: on this node, then (Conclude) across the nodes.
struct AttemptReport {
  int attempt = 0;
  AttemptResult result;
  int exit_code = 0;
  std::string error;     // one line: the root cause or the reason it stopped; "" on success
  bool verdict = false;  // a built-in printed its own verdict (preflight FAIL): no diagnosis
  bool root_cause_printed = false;  // Judge printed the root-cause block of a rank of this node
  // Where the attempt's summary.json went: the run directory's, or the second place a full disk
  // sent it to (SummaryWriter::written_path).
  std::string summary_path;
  // Node 0's restart policy after a failure --max-restarts would restart (NodeRole::Next).
  std::optional<AppliedDecision> restart_decision;
};

// The agent calls, in order: Prepare, Open, then per attempt OnTick (while it runs), Conclude,
// Explain and Next; Close after the last.
class NodeRole {
 public:
  virtual ~NodeRole() = default;

  // Before the run directory exists: the job's identity. Node 0 starts its coordinator here; a
  // joining node blocks until node 0 lets it in (at most --rdzv-timeout). Throws UsageError.
  virtual JobIdentity Prepare() = 0;
  // The run directory exists and `supervisor` will run the attempts. Blocks for the first node
  // rendezvous on node 0 of several and sets `plan`'s membership from it; false (the reason
  // printed) when the job cannot start.
  virtual bool Open(JobPlan* plan, Supervisor* supervisor) = 0;
  // On the supervisor's loop every tick while an attempt runs; must not block for long.
  virtual void OnTick() = 0;
  // On the supervisor's loop when a rank exits or the teardown begins (no ticks come during a
  // teardown): node 0 refreshes the live view, so /healthz and status say so at once.
  virtual void OnRankChange() {}
  // The first error rank `rank` reported in this attempt, "" for none.
  virtual std::string RankError(int rank) = 0;
  // The index in `result.ranks` of a failed attempt's root cause (node 0: the diagnosis' choice,
  // once the other nodes said how their ranks ended); nullopt when it is another node's rank,
  // with `elsewhere` its one line ("node 1 (host) failed: rank 3 failed: ...").
  virtual std::optional<size_t> RootCause(const AttemptResult& result, std::string* elsewhere) {
    (void)elsewhere;
    return *result.first_failure;
  }
  // After this node's ranks ended: the other nodes' say in the verdict (may change the exit code
  // and error), and what summary.json records of them. Blocks until every node is done.
  virtual void Conclude(AttemptReport* report, SummaryInfo* summary) = 0;
  // After summary.json was written: the failure's picture across ranks, where this node has it.
  virtual void Explain(const AttemptReport& report) = 0;
  // After the attempt's summary: whether another attempt follows (node 0 decides, by the plan's
  // rules; a joining node asks it). If so, `put_away` has moved the attempt's files aside
  // before the next node rendezvous, `plan` holds the new membership and `how` says "restart"
  // or "rejoin". Blocks for that rendezvous. May change `report`: a joining node takes the
  // job's verdict from node 0, a rendezvous that fails ends the job.
  virtual bool Next(AttemptReport* report, JobPlan* plan, std::string* how,
                    const std::function<void()>& put_away) = 0;
  // After the last attempt. Blocks at most a few seconds.
  virtual void Close(const AttemptReport& last) = 0;
  // Node 0: where the job events it sees (hang, straggler, node lost) also go; `log` outlives
  // the role. Other roles see none.
  virtual void SetEventLog(JobEventLog* log) { (void)log; }
  // Node 0: the straggler verdicts so far and a count that moves when one starts or ends (both
  // cheap, on the supervisor's thread). Other roles have none.
  virtual std::vector<rundir::StragglerVerdict> Stragglers() const { return {}; }
  virtual int straggler_generation() const { return 0; }

  // Thread-safe, does not block: `signal` came while no attempt runs (the agent's
  // InterruptWatch): a node rendezvous wait of Prepare, Open or Next ends now, and the job ends
  // with exit code 128 + signal. The role waits for nothing more but Close.
  virtual void Interrupt(int signal) { (void)signal; }
  // Set when the job ended before this node's first attempt: a signal in the node rendezvous,
  // a rendezvous that failed, or a job that finished before this node could join. Its exit
  // code and reason; the agent writes the summary and closes the role, and no rank starts.
  const std::optional<AttemptReport>& ended() const { return ended_; }

 protected:
  std::optional<AttemptReport> ended_;
};

// `report` says that `signal` ended the job before (or between) its attempts, `where`: "while
// waiting for nodes". Keeps the ranks it holds (the attempt before, if any).
void MarkInterrupted(AttemptReport* report, int signal, const std::string& where);

// What the roles share. The job the nodes must agree on: the scheduler's (a Slurm step), else the
// run id the user gave (torchrun's --rdzv-id); "" when neither is known, and then nothing is
// checked.
std::string JobIdOf(const LaunchOptions& o);
// The join timeout of the node rendezvous: --rdzv-conf join_timeout, else --rdzv-timeout.
std::chrono::milliseconds JoinTimeout(const LaunchOptions& o);
// "1 node", "3 nodes".
std::string Plural(int n, const char* what);

// The role `setup` names. Without a node rank (kElected) the first launcher to listen on the
// rendezvous endpoint hosts the coordinator as node 0 and the others join it, as torchrun's c10d
// backend does; `setup->role` becomes the role taken. Checks --master-port on node 0; throws
// UsageError.
std::unique_ptr<NodeRole> MakeNodeRole(const LaunchOptions& options, NodeSetup* setup,
                                       const std::string& host);

}  // namespace dlaunch::launcher
