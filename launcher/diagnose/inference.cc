#include "launcher/diagnose/inference.h"

#include <algorithm>
#include <climits>
#include <tuple>

#include "core/exit_codes.h"
#include "launcher/diagnose/group_match.h"
#include "launcher/diagnose/mismatch_finder.h"

namespace dlaunch::launcher {

bool Signature::operator<(const Signature& o) const {
  return std::tie(op, dtype, count, root) < std::tie(o.op, o.dtype, o.count, o.root);
}

bool Signature::operator==(const Signature& o) const {
  return op == o.op && dtype == o.dtype && count == o.count && root == o.root;
}

int64_t WaitingMs(const RankFacts& v, const FlightEntry* e) {
  if (e == nullptr) return -1;
  int64_t since_ns = e->started_unix_ns > 0 ? e->started_unix_ns : e->scheduled_unix_ns;
  if (since_ns <= 0 || e->state == rundir::OpState::kCompleted) return -1;
  return v.ref_ms > 0 ? std::max<int64_t>(0, v.ref_ms - since_ns / 1000000) : -1;
}

namespace {

bool Contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// One inference over one set of facts; each step fills a part of the verdict.
class Inference {
 public:
  Inference(const std::vector<RankFacts>& facts, const InferenceInput& input)
      : f_(facts), in_(input) {}

  Verdict Run() {
    if (f_.empty()) return v_;
    FindMismatch();
    if (v_.mismatch.seq < 0) {
      if (const FlightEntry* recv = FindFirstP2PMismatch(f_, &v_.mismatch)) SetCollective(*recv);
    }
    FindFrontier();
    FindRootCause();
    FindLostNode();
    if (v_.mismatch.seq >= 0) {
      Mismatched();
    } else if (v_.lost_node >= 0) {
      NodeLost();
    } else if (root_ >= 0 && FalloutOfCleanExits()) {
      HungAtCollective();
    } else if (root_ >= 0) {
      Failed();
    } else if (HangEvidence() && any_progress_) {
      HungAtCollective();
    } else if (HangEvidence() || in_.hang_suspected) {
      HungWithoutRecorder();
    } else if (AllOk()) {
      v_.kind = DiagnosisKind::kOk;
    }
    PlaceRanks();
    return v_;
  }

 private:
  // The lowest collective at which ranks' flight recorders disagree (mismatch_finder.h).
  void FindMismatch() {
    if (const FlightEntry* good = FindFirstMismatch(f_, &v_.mismatch, &v_.p2p_not_compared)) {
      SetCollective(*good);
    }
  }

  // The lowest seq not completed everywhere, and who entered it. A rank that stopped answering is
  // known only from its last heartbeat, which may be long out of date: it does not move the
  // frontier while fresher ranks exist, and where it stands is unknown unless the heartbeat fits.
  void FindFrontier() {
    bool any_fresh = false;
    for (const RankFacts& r : f_) any_fresh = any_fresh || (r.has_progress && !r.unresponsive());
    int64_t min_completed = -1;
    for (const RankFacts& r : f_) {
      if (!r.has_progress || (any_fresh && r.unresponsive())) continue;
      min_completed = any_progress_ ? std::min(min_completed, r.last_completed) : r.last_completed;
      any_progress_ = true;
    }
    v_.frontier = any_progress_ ? min_completed + 1 : -1;
    v_.group = FrontierGroup(f_, v_.frontier);
    for (const RankFacts& r : f_) {
      if (!r.has_progress) {
        v_.unknown.push_back(r.rank);
        continue;
      }
      if (v_.group.matched() && PlaceInGroup(r)) continue;
      const FlightEntry* e = r.flight ? r.flight->Find(v_.frontier) : nullptr;
      if (e) frontier_entries_[r.rank] = e;
      if (e || r.last_started >= v_.frontier) {
        v_.entered.push_back(r.rank);
      } else if (!r.unresponsive() || r.last_completed >= v_.frontier - 1) {
        v_.missing.push_back(r.rank);
      } else {
        v_.stale.insert(r.rank);
      }
    }
  }

  // Places `r` by its call at the group's pg_seq (group_match.h); false for a member without a
  // flight record, placed by seq instead.
  bool PlaceInGroup(const RankFacts& r) {
    const GroupStanding s = StandingIn(r, v_.group);
    switch (s.place) {
      case GroupPlace::kOutside:
        v_.outside.push_back(r.rank);
        return true;
      case GroupPlace::kUnknown:
        return false;
      case GroupPlace::kDone:
        done_in_group_.insert(r.rank);
        [[fallthrough]];
      case GroupPlace::kEntered:
        if (s.entry) frontier_entries_[r.rank] = s.entry;
        v_.entered.push_back(r.rank);
        return true;
      case GroupPlace::kBefore:
        break;
    }
    if (!r.unresponsive() || s.last_pg_seq >= v_.group.pg_seq - 1) {
      v_.missing.push_back(r.rank);
    } else {
      v_.stale.insert(r.rank);
    }
    return true;
  }

  // Whether `rank` got through the frontier collective: by the group's pg_seq where it was
  // matched in a group (a member without a record there by seq), else by seq.
  bool CompletedFrontier(int rank) const {
    if (v_.group.matched() && Contains(v_.outside, rank)) return false;
    if (v_.group.matched() && (done_in_group_.count(rank) || frontier_entries_.count(rank))) {
      return done_in_group_.count(rank) > 0;
    }
    return f_[rank].last_completed >= v_.frontier;
  }

  // The first observed failure; a rank's own failure beats another's "peer gone" error, whatever
  // the clocks say (the launcher chooses through the same PickRootCause).
  void FindRootCause() { root_ = PickRootCause(f_); }

  // The lowest lost node, unless a rank elsewhere failed by itself: the loss explains exits and
  // "peer gone" errors, not another rank's own error or OOM.
  void FindLostNode() {
    int node = -1;
    std::string label;
    for (const RankFacts& r : f_) {
      if (r.lost_node >= 0 && (node < 0 || r.lost_node < node)) {
        node = r.lost_node;
        label = r.lost_node_label;
      }
    }
    if (node < 0) return;
    if (root_ >= 0 && f_[root_].lost_node < 0 && f_[root_].failure.source != FailureSource::kExit &&
        WeightOf(f_[root_].failure) != FailureWeight::kFallout) {
      return;
    }
    v_.lost_node = node;
    v_.lost_node_label = label;
    for (const RankFacts& r : f_) {
      if (r.lost_node == node) v_.lost_ranks.push_back(r.rank);
    }
  }

  void NodeLost() {
    v_.kind = DiagnosisKind::kFailure;
    v_.culprits = v_.lost_ranks;
    v_.root = -1;
  }

  // Ranks whose last activity is the oldest, within the tie margin of it; `tie` when several.
  std::vector<int> QuietLongest(bool running_only, bool* tie) const {
    int64_t oldest = INT64_MAX, newest_activity = 0;
    for (const RankFacts& r : f_) {
      if (running_only && r.exited) continue;
      if (running_only && r.last_activity_ms <= 0) continue;
      oldest = std::min(oldest, r.last_activity_ms);
      newest_activity = std::max({newest_activity, r.ref_ms, r.last_activity_ms});
    }
    std::vector<int> out;
    if (oldest == INT64_MAX) return out;
    // Ranks never heard from (time 0) tie only with each other.
    const int64_t silence = newest_activity > oldest ? newest_activity - oldest : 0;
    const int64_t margin = oldest > 0 ? std::max<int64_t>(kTieMs, silence / 10) : 1;
    for (const RankFacts& r : f_) {
      if (running_only && (r.exited || r.last_activity_ms <= 0)) continue;
      if (r.last_activity_ms - oldest < margin) out.push_back(r.rank);
    }
    *tie = out.size() > 1;
    return out;
  }

  bool HangEvidence() const {
    bool timeouts = false;
    bool any_running = false;
    for (const RankFacts& r : f_) {
      timeouts = timeouts || r.reported_timeout || (r.exited && r.watchdog_exit);
      any_running = any_running || !r.exited;
    }
    const bool clean_end = in_.launcher_exit_code.has_value() && !any_running;
    const bool partial_frontier = !v_.entered.empty() && !v_.missing.empty();
    return in_.hang_suspected || timeouts || in_.launcher_exit_code == kExitHang ||
           (partial_frontier && !clean_end);
  }

  bool AllOk() const {
    for (const RankFacts& r : f_) {
      if (!r.exited || r.exit_code != 0 || r.signal != 0) return false;
    }
    return true;
  }

  // `r`'s call at `seq`; at the frontier matched in a group, its call at the group's pg_seq.
  const FlightEntry* EntryAt(const RankFacts& r, int64_t seq) const {
    if (v_.group.matched() && seq == v_.frontier) {
      auto it = frontier_entries_.find(r.rank);
      return it == frontier_entries_.end() ? nullptr : it->second;
    }
    return r.flight ? r.flight->Find(seq) : nullptr;
  }

  void SetCollective(const FlightEntry& e) { v_.collective = {e.op, e.dtype, e.count, e.bytes}; }

  // Op, dtype and size of collective `seq` as most ranks recorded it, else the heartbeat's op.
  void FillCollective(int64_t seq) {
    std::map<Signature, std::pair<int, const FlightEntry*>> votes;
    for (const RankFacts& r : f_) {
      if (const FlightEntry* e = EntryAt(r, seq)) {
        auto& vote = votes[SignatureOf(*e)];
        if (vote.first++ == 0) vote.second = e;
      }
    }
    const FlightEntry* pick = nullptr;
    int most = 0;
    for (const auto& [signature, vote] : votes) {
      if (vote.first > most) {
        most = vote.first;
        pick = vote.second;
      }
    }
    if (pick) {
      SetCollective(*pick);
      return;
    }
    for (const RankFacts& r : f_) {
      if (r.linked && r.last_started >= seq && !r.current_op.empty()) {
        v_.collective.op = r.current_op;
        return;
      }
    }
  }

  void Mismatched() {
    v_.kind = DiagnosisKind::kMismatch;
    v_.seq = v_.mismatch.seq;
    v_.culprits = v_.mismatch.culprits;
  }

  void Failed() {
    v_.kind = DiagnosisKind::kFailure;
    const RankFacts& r = f_[root_];
    v_.root = root_;
    v_.culprits = {root_};
    const bool partial_frontier = !v_.entered.empty() && !v_.missing.empty();
    int64_t seq =
        r.last_started > r.last_completed ? r.last_started : (partial_frontier ? v_.frontier : -1);
    if (seq < 0 && r.has_progress && v_.frontier >= 0 && !v_.entered.empty()) seq = v_.frontier;
    // Its own record died with it; the others show where the job was.
    v_.root_record_lost = seq < 0 && !r.has_progress && v_.frontier >= 0 && !v_.entered.empty();
    if (v_.root_record_lost) seq = v_.frontier;
    v_.seq = seq;
    if (seq >= 0) {
      FillCollective(seq);
      v_.root_inside = r.last_started >= seq;
      for (int e : v_.entered) {
        if (e != root_ && !f_[e].exited) v_.left_waiting.push_back(e);
      }
    }
  }

  // The only failure reads as losing a peer, and the ranks missing from the collective the others
  // entered exited 0: they left early (an exit, a return) and the others failed waiting for them.
  // That is the missing ranks' doing, however cleanly they went.
  bool FalloutOfCleanExits() const {
    if (WeightOf(f_[root_].failure) != FailureWeight::kFallout || v_.missing.empty()) return false;
    for (const RankFacts& r : f_) {
      if (r.failed() && WeightOf(r.failure) != FailureWeight::kFallout) return false;
    }
    return std::all_of(v_.missing.begin(), v_.missing.end(), [&](int m) {
      const RankFacts& r = f_[m];
      return r.exited && r.exit_code == 0 && r.signal == 0 && !r.torn_down;
    });
  }

  // Ranks the collective watchdogs named as missing from the frontier collective: they compared
  // progress markers before giving up.
  std::vector<int> ReportedMissing() const {
    std::set<int> ranks;
    for (const RankFacts& r : f_) {
      for (const TimeoutClaim& c : r.timeout_claims) {
        if (c.seq.value_or(v_.frontier) != v_.frontier) continue;
        for (int m : c.missing_ranks) {
          if (m < static_cast<int>(f_.size())) ranks.insert(m);
        }
      }
    }
    return {ranks.begin(), ranks.end()};
  }

  // Ranks still waiting in the frontier collective that other ranks completed: every rank's part
  // arrived (or the others could not have completed it), so what holds them is their own (a
  // stopped process, a stuck thread), not a peer. A rank the launcher tore down there (after the
  // others' watchdogs fired and they left) was still behind when it went.
  std::vector<int> StayedBehind() const {
    std::vector<int> behind;
    bool someone_done = false;
    for (int e : v_.entered) {
      const RankFacts& r = f_[e];
      if (CompletedFrontier(e)) {
        someone_done = true;
      } else if (!r.exited || r.torn_down) {
        behind.push_back(e);
      }
    }
    return someone_done ? behind : std::vector<int>{};
  }

  // Whether some rank's flight.json answered a dump request: then a rank that left none did not
  // answer, which is evidence, not just a teardown that came first.
  bool DumpWasRequested() const {
    for (const RankFacts& r : f_) {
      if (r.flight && r.flight->reason == "request") return true;
    }
    return false;
  }

  // Culprits of a hang, strongest evidence first.
  std::vector<int> HangCulprits(CulpritReason* reason, bool* tie) const {
    if (!v_.missing.empty()) {
      *reason = CulpritReason::kNeverEntered;
      return v_.missing;
    }
    std::vector<int> culprits = ReportedMissing();
    if (!culprits.empty()) {
      *reason = CulpritReason::kNamedByWatchdog;
      return culprits;
    }
    for (const RankFacts& r : f_) {
      if (r.has_progress && r.unresponsive()) culprits.push_back(r.rank);
    }
    if (!culprits.empty()) {
      *reason = CulpritReason::kUnresponsive;
      return culprits;
    }
    culprits = StayedBehind();
    if (!culprits.empty()) {
      *reason = CulpritReason::kStayedBehind;
      return culprits;
    }
    // A rank that is gone while the others wait cannot ever join them.
    for (const RankFacts& r : f_) {
      const bool consequence = r.torn_down || (r.record->summary && r.watchdog_exit);
      if (r.exited && !consequence && r.has_progress && !CompletedFrontier(r.rank) &&
          !Contains(v_.outside, r.rank)) {
        culprits.push_back(r.rank);
      }
    }
    if (!culprits.empty()) {
      *reason = CulpritReason::kExitedWhileWaited;
      return culprits;
    }
    if (!v_.unknown.empty() && !v_.entered.empty()) {
      // The others dumped their flight recorders; a rank that left none although it was asked
      // (or is still there) is the silent one. A rank the launcher tore down first says nothing.
      const bool asked = DumpWasRequested() || in_.now_unix_ms > 0;
      for (int r : v_.unknown) {
        if (asked || (!f_[r].exited && f_[r].dir_present)) culprits.push_back(r);
      }
      *reason = CulpritReason::kLeftNoRecord;
      if (!culprits.empty()) return culprits;
      // Weaker: the others wait in a collective while its telemetry shows it doing something else.
      for (int r : v_.unknown) {
        const std::string& phase = f_[r].phase;
        if (!phase.empty() && phase != "communication") culprits.push_back(r);
      }
      *reason = CulpritReason::kOtherPhase;
      return culprits;
    }
    if (v_.entered.empty()) {
      // Nobody is in a collective: the rank whose activity stopped first holds the others.
      culprits = QuietLongest(true, tie);
      *reason = CulpritReason::kQuietLongest;
    }
    return culprits;
  }

  void HungAtCollective() {
    v_.kind = DiagnosisKind::kHang;
    v_.seq = v_.frontier;
    FillCollective(v_.frontier);
    v_.deadlock = CrossGroupDeadlock(f_);
    if (!v_.deadlock.empty()) {
      v_.hang_kind = HangKind::kInCollective;
      for (const GroupWait& w : v_.deadlock) {
        v_.culprits.push_back(w.rank);
        v_.culprit_reasons[w.rank] = CulpritReason::kUnstated;
      }
      for (int e : v_.entered) (CompletedFrontier(e) ? v_.done : v_.waiting).push_back(e);
      return;
    }
    CulpritReason reason = CulpritReason::kNeverEntered;
    v_.culprits = HangCulprits(&reason, &v_.tie);
    const std::vector<int> reported = ReportedMissing();
    for (int c : v_.culprits) {
      // A culprit's own state can say more than the rule that found it.
      const RankFacts& r = f_[c];
      CulpritReason why = reason;
      if (reason != CulpritReason::kNeverEntered && reason != CulpritReason::kQuietLongest &&
          reason != CulpritReason::kStayedBehind) {
        why = CulpritReason::kUnstated;
        if (r.unresponsive()) {
          why = CulpritReason::kUnresponsive;
        } else if (!r.has_progress && Contains(reported, c)) {
          why = CulpritReason::kNamedByWatchdog;
        } else if (!r.has_progress) {
          why = CulpritReason::kLeftNoRecord;
        } else if (r.exited) {
          why = CulpritReason::kExitedWhileWaited;
        }
      }
      v_.culprit_reasons[c] = why;
    }
    if (v_.entered.empty()) {
      v_.hang_kind = v_.frontier == 0 ? HangKind::kBeforeFirst : HangKind::kBetweenCollectives;
      return;
    }
    v_.hang_kind = HangKind::kInCollective;
    for (int e : v_.entered) (CompletedFrontier(e) ? v_.done : v_.waiting).push_back(e);
  }

  // Programs without libdlaunch: only output, exits and stacks are known.
  void HungWithoutRecorder() {
    v_.kind = DiagnosisKind::kHang;
    v_.hang_kind = HangKind::kNoFlightRecorder;
    for (const RankFacts& r : f_) {
      if (!r.exited) v_.running.push_back(r.rank);
      if (r.stack.activity == StackActivity::kNone) continue;
      (r.stack.activity == StackActivity::kCollective ? v_.in_collective : v_.elsewhere)
          .push_back(r.rank);
    }
    const bool some_exited = !v_.running.empty() && v_.running.size() < f_.size();
    if (some_exited) {
      v_.unlinked = UnlinkedJudgement::kStillRunning;
      v_.culprits = v_.running;
    } else if (!v_.in_collective.empty() && !v_.elsewhere.empty()) {
      // The others wait inside a collective; the odd stacks out are what they wait for.
      v_.unlinked = UnlinkedJudgement::kOutsideCollective;
      v_.culprits = v_.elsewhere;
    } else if (std::vector<int> odd = OddStacksOut(); !odd.empty()) {
      v_.unlinked = UnlinkedJudgement::kOddStackOut;
      v_.culprits = odd;
      int other = 0;
      while (Contains(odd, other) || f_[other].stack.activity == StackActivity::kNone) ++other;
      v_.odd_activity = f_[odd.front()].stack.activity;
      v_.usual_activity = f_[other].stack.activity;
    } else {
      // Only without stack evidence: output times are the weakest sign, and under CPU load
      // several ranks fall silent together.
      v_.unlinked = UnlinkedJudgement::kSilentLongest;
      v_.culprits = QuietLongest(false, &v_.tie);
      if (v_.culprits.size() == f_.size()) {
        v_.culprits.clear();
        v_.tie = false;
      }
    }
  }

  // Ranks outside the largest group of main-thread stack activities, when that group is unique
  // and holds at least two ranks: the ones not doing what everybody else does. Ranks whose stack
  // could not be taken (gdb timed out under load) are left out rather than spoiling the rest.
  std::vector<int> OddStacksOut() const {
    std::map<StackActivity, std::vector<int>> groups;
    for (const RankFacts& r : f_) {
      if (r.stack.activity != StackActivity::kNone) groups[r.stack.activity].push_back(r.rank);
    }
    if (groups.size() < 2) return {};
    size_t largest = 0, count = 0;
    for (const auto& [activity, ranks] : groups) largest = std::max(largest, ranks.size());
    for (const auto& [activity, ranks] : groups) count += ranks.size() == largest;
    if (count != 1 || largest < 2) return {};
    std::vector<int> odd;
    for (const auto& [activity, ranks] : groups) {
      if (ranks.size() != largest) odd.insert(odd.end(), ranks.begin(), ranks.end());
    }
    std::sort(odd.begin(), odd.end());
    return odd;
  }

  // Whether `rank` was placed by its group's pg_seq at the collective in question.
  bool InGroupAtSeq(int rank) const {
    return v_.group.matched() && v_.seq == v_.frontier &&
           (Contains(v_.entered, rank) || Contains(v_.missing, rank));
  }

  // Where each rank stood relative to the collective in question comes first; how it ended
  // (failed, exited, torn down) is reported beside it.
  void PlaceRanks() {
    for (const RankFacts& r : f_) {
      RankPlace p;
      if (r.lost_node >= 0) {
        v_.places.push_back(p);  // unknown: its node is gone
        continue;
      }
      auto entry = frontier_entries_.find(r.rank);
      // Waiting is measured in the frontier collective, which is also `seq` for hangs.
      p.waiting_ms = WaitingMs(r, entry == frontier_entries_.end() ? nullptr : entry->second);
      if (r.failed()) {
        p.state = RankState::kFailed;
      } else if (v_.stale.count(r.rank)) {
        p.state = r.stopped ? RankState::kStopped : RankState::kUnresponsive;
      } else if (InGroupAtSeq(r.rank)) {
        p.state = Contains(v_.missing, r.rank) ? RankState::kNeverEntered
                  : CompletedFrontier(r.rank)  ? RankState::kCompleted
                                               : RankState::kWaiting;
        p.stopped = r.stopped;
      } else if (v_.seq >= 0 && r.has_progress && !Contains(v_.outside, r.rank)) {
        p.state = r.last_completed >= v_.seq ? RankState::kCompleted
                  : r.last_started >= v_.seq ? RankState::kWaiting
                                             : RankState::kNeverEntered;
        p.stopped = r.stopped;
      } else if (r.exited) {
        p.state = RankState::kExited;
      } else if (r.stopped) {
        p.state = RankState::kStopped;
      } else if (r.vanished) {
        p.state = RankState::kUnknown;  // not running, its end unrecorded
      } else {
        p.state =
            r.has_progress || r.dir_present || r.live ? RankState::kRunning : RankState::kUnknown;
      }
      v_.places.push_back(p);
    }
  }

  const std::vector<RankFacts>& f_;
  const InferenceInput& in_;
  Verdict v_;
  bool any_progress_ = false;
  int root_ = -1;
  std::map<int, const FlightEntry*> frontier_entries_;
  std::set<int> done_in_group_;  // members past the group's pg_seq
};

}  // namespace

Verdict Infer(const std::vector<RankFacts>& facts, const InferenceInput& input) {
  return Inference(facts, input).Run();
}

}  // namespace dlaunch::launcher
