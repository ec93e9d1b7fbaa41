// What to do after a failed attempt, read from what the attempt left rather than from its exit
// code alone: a failure that will happen again the same way stops the job, a node that keeps
// holding the culprit is left out, and everything else restarts as torchrun would. A pure
// function of the attempts' facts, so that the decision is data (a table test, a console line,
// an event and a field in summary.json), and `observe` can record it without acting on it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launcher/cli/options.h"

namespace dlaunch::launcher {

// What one failed attempt left: its culprit and how it ended, in the rank's own words where it
// wrote them (error.json), and how far the job got.
struct FailureFacts {
  int attempt = 0;
  int exit_code = 1;  // dlaunch's, for the attempt
  bool hang = false;  // the attempt was stopped for a hang
  int culprit_rank = -1;
  int culprit_node = -1;    // the node whose rank was the culprit; -1 unknown
  int rank_exit_code = -1;  // the culprit's own exit code; -1 when a signal ended it
  int rank_signal = 0;      // the signal that ended it; 0 when it exited
  bool oom = false;         // error.json says out of memory
  std::string exception;    // error.json's exception type ("ValueError"); "" when none
  std::string call_site;    // where it was raised ("train.py:42 step"); "" when unknown
  int64_t step = -1;        // the culprit's last step (its heartbeat); -1 unknown
  int64_t best_step = -1;   // the highest step any rank reached in the attempt; -1 unknown
  bool collective_completed = false;  // any rank completed a collective in the attempt
  bool heartbeat_seen = false;        // some rank's agent said how far it got (else: unknown)
  std::vector<int> lost_nodes;        // nodes lost in the attempt
};

enum class RestartAction { kRestart, kStop, kExclude };
// "restart", "stop", "exclude".
const char* RestartActionName(RestartAction action);

struct RestartDecision {
  RestartAction action = RestartAction::kRestart;
  // Which rule decided: "startup" (an import, syntax, file or argument error before the first
  // collective), "deterministic" (the same failure in two attempts in a row), "no-progress" (K
  // attempts without a step beyond the earlier best), "node" (a lost node, or one holding the
  // culprit twice in a row), "transient" (anything else).
  std::string rule;
  int node = -1;       // kExclude: the node to leave out
  std::string reason;  // one line: what it rests on
};

struct RestartPolicyConfig {
  // Attempts in a row without a step beyond the best of the attempts before them that end the
  // job as a restart storm.
  int no_progress_attempts = 3;
};

// The decision after the last of `attempts` (oldest first; every one of them failed). Pure.
RestartDecision DecideRestart(const std::vector<FailureFacts>& attempts,
                              const RestartPolicyConfig& config = {});

// A decision as node 0 applies it under `policy`: the console line, the events.jsonl message and
// summary.json's field.
struct AppliedDecision {
  RestartPolicy policy = RestartPolicy::kAuto;
  RestartDecision decision;
  // The job does what the decision says: auto's stop. (Leaving a node out is not done yet: auto's
  // exclude restarts every node, and says so.)
  bool acted = false;
};
AppliedDecision ApplyRestartPolicy(RestartPolicy policy, RestartDecision decision);
// "restart policy auto: stop (deterministic): rank 1 raised ..." without "dlaunch: ". Pure.
std::string DescribeDecision(const AppliedDecision& applied);

}  // namespace dlaunch::launcher
