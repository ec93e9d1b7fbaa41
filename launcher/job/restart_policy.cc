#include "launcher/job/restart_policy.h"

#include <algorithm>
#include <optional>
#include <set>

#include "core/base/format.h"

namespace dlaunch::launcher {
namespace {

// Python's errors that no restart mends when they come before the job's first collective: the
// program cannot load, or its input is not there.
const std::set<std::string>& StartupExceptions() {
  static const std::set<std::string> names = {
      "ImportError",    "ModuleNotFoundError", "SyntaxError",       "IndentationError",
      "TabError",       "FileNotFoundError",   "IsADirectoryError", "NotADirectoryError",
      "PermissionError"};
  return names;
}

// argparse's exit code for a bad command line (and the shells' for a misuse).
constexpr int kArgumentErrorExit = 2;

std::string Describe(const FailureFacts& f) {
  std::string what = "rank " + std::to_string(f.culprit_rank) + " ";
  if (!f.exception.empty()) {
    what += "raised " + f.exception;
    if (!f.call_site.empty()) what += " at " + f.call_site;
  } else if (f.rank_signal != 0) {
    what += "ended by " + base::SignalName(f.rank_signal);
  } else {
    what += "exited " + std::to_string(f.rank_exit_code);
  }
  if (f.step >= 0) what += " at step " + std::to_string(f.step);
  return what;
}

std::optional<RestartDecision> Startup(const FailureFacts& f) {
  // "Before the first collective" only where an agent's heartbeat says so.
  if (!f.heartbeat_seen || f.collective_completed || f.hang || f.culprit_rank < 0) {
    return std::nullopt;
  }
  if (!f.exception.empty() && StartupExceptions().count(f.exception)) {
    return RestartDecision{RestartAction::kStop, "startup", -1,
                           Describe(f) +
                               " before the first collective: a restart would fail "
                               "the same way"};
  }
  if (f.exception.empty() && f.rank_signal == 0 && f.rank_exit_code == kArgumentErrorExit) {
    return RestartDecision{RestartAction::kStop, "startup", -1,
                           "rank " + std::to_string(f.culprit_rank) +
                               " exited 2 (a command-line error) before the first collective: a "
                               "restart would fail the same way"};
  }
  return std::nullopt;
}

// The same exception at the same call site, or the same exit at the same step, by the same rank.
bool SameFailure(const FailureFacts& a, const FailureFacts& b) {
  if (a.hang || b.hang || a.culprit_rank < 0 || a.culprit_rank != b.culprit_rank) return false;
  if (a.oom || b.oom) return false;  // memory can be a neighbour's
  if (!a.exception.empty() || !b.exception.empty()) {
    return a.exception == b.exception && !a.call_site.empty() && a.call_site == b.call_site;
  }
  // No exception recorded: an exit code (never a signal: a kill comes from outside) at a step.
  return a.rank_signal == 0 && b.rank_signal == 0 && a.rank_exit_code == b.rank_exit_code &&
         a.step >= 0 && a.step == b.step;
}

std::optional<RestartDecision> Node(const std::vector<FailureFacts>& attempts) {
  const FailureFacts& last = attempts.back();
  if (!last.lost_nodes.empty() && last.lost_nodes.front() > 0) {
    const int node = last.lost_nodes.front();
    return RestartDecision{
        RestartAction::kExclude, "node", node,
        "node " + std::to_string(node) + " was lost in attempt " + std::to_string(last.attempt)};
  }
  // Node 0 hosts the job's coordinator: it is never left out.
  if (attempts.size() < 2 || last.culprit_node <= 0) return std::nullopt;
  const FailureFacts& before = attempts[attempts.size() - 2];
  if (before.culprit_node != last.culprit_node) return std::nullopt;
  return RestartDecision{RestartAction::kExclude, "node", last.culprit_node,
                         "node " + std::to_string(last.culprit_node) +
                             " held the culprit of attempts " + std::to_string(before.attempt) +
                             " and " + std::to_string(last.attempt) + " (" + Describe(last) + ")"};
}

// Only where every attempt said how far it got (a heartbeat's step): a program that reports no
// steps is never judged by them.
std::optional<RestartDecision> NoProgress(const std::vector<FailureFacts>& attempts, int k) {
  if (k <= 0 || static_cast<int>(attempts.size()) <= k) return std::nullopt;
  for (const FailureFacts& f : attempts) {
    if (f.best_step < 0) return std::nullopt;
  }
  int64_t best_before = -1;
  for (size_t i = 0; i + k < attempts.size(); ++i) {
    best_before = std::max(best_before, attempts[i].best_step);
  }
  for (size_t i = attempts.size() - k; i < attempts.size(); ++i) {
    if (attempts[i].best_step > best_before) return std::nullopt;
  }
  return RestartDecision{RestartAction::kStop, "no-progress", -1,
                         std::to_string(k) + " attempts in a row got no step beyond step " +
                             std::to_string(best_before) + ": a restart storm"};
}

}  // namespace

const char* RestartActionName(RestartAction action) {
  switch (action) {
    case RestartAction::kRestart:
      return "restart";
    case RestartAction::kStop:
      return "stop";
    case RestartAction::kExclude:
      return "exclude";
  }
  return "restart";
}

RestartDecision DecideRestart(const std::vector<FailureFacts>& attempts,
                              const RestartPolicyConfig& config) {
  if (attempts.empty()) return {RestartAction::kRestart, "transient", -1, "no failure recorded"};
  const FailureFacts& last = attempts.back();
  if (auto startup = Startup(last)) return *startup;
  if (attempts.size() >= 2 && SameFailure(attempts[attempts.size() - 2], last)) {
    return {RestartAction::kStop, "deterministic", -1,
            Describe(last) + " in attempts " +
                std::to_string(attempts[attempts.size() - 2].attempt) + " and " +
                std::to_string(last.attempt) + ": a restart would fail the same way"};
  }
  if (auto node = Node(attempts)) return *node;
  if (auto storm = NoProgress(attempts, config.no_progress_attempts)) return *storm;
  return {RestartAction::kRestart, "transient", -1, Describe(last) + ": not seen to repeat"};
}

AppliedDecision ApplyRestartPolicy(RestartPolicy policy, RestartDecision decision) {
  AppliedDecision applied;
  applied.policy = policy;
  applied.acted = policy == RestartPolicy::kAuto && decision.action == RestartAction::kStop;
  applied.decision = std::move(decision);
  return applied;
}

std::string DescribeDecision(const AppliedDecision& a) {
  const RestartDecision& d = a.decision;
  std::string line = std::string("restart policy ") + RestartPolicyName(a.policy) + ": ";
  const bool differs = d.action != RestartAction::kRestart;
  std::string action = RestartActionName(d.action);
  if (d.action == RestartAction::kExclude) action += " node " + std::to_string(d.node);
  if (!differs || a.acted) return line + action + " (" + d.rule + "): " + d.reason;
  switch (a.policy) {
    case RestartPolicy::kObserve:
      return line + "would " + action + " (" + d.rule + "): " + d.reason + "; restarting";
    case RestartPolicy::kAlways:
      return line + "restart (auto would " + action + ", " + d.rule + ": " + d.reason + ")";
    case RestartPolicy::kAuto:
      break;
  }
  return line + action + " (" + d.rule + "): " + d.reason +
         "; leaving a node out is not done yet: restarting every node";
}

}  // namespace dlaunch::launcher
