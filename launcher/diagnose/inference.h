// The inference layer: from every rank's facts to a verdict — mismatch, failure, hang or ok; the
// culprits; the collective in question; where each rank stood — as plain data. No text here:
// rendering (render_text.h) words the verdict. Pure computation; never throws.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/run_dir/diagnosis_file.h"
#include "launcher/diagnose/rank_facts.h"

namespace dlaunch::launcher {

using rundir::DiagnosisKind;
using rundir::HangKind;
using rundir::MismatchKind;
using rundir::RankState;

// What ranks compare for one collective: op, dtype, count and (for broadcast) root.
struct Signature {
  std::string op, dtype;
  int64_t count = -1;
  int root = -1;
  bool operator<(const Signature& o) const;
  bool operator==(const Signature& o) const;
};

struct Collective {
  std::string op, dtype;
  int64_t count = -1;
  int64_t bytes = -1;
};

// Ranks that called one signature at the mismatched collective.
struct MismatchGroup {
  Signature signature;
  std::vector<int> ranks;
  bool culprit = false;  // not the majority
  int64_t seq = -1;      // the seq of its first rank's entry
  int64_t bytes = -1;
  std::string call_site;  // of its first rank's entry (Python ranks)
};

// Why one side of an even split is taken as the wrong one.
enum class TieBreak {
  kNone,           // not a tie: the majority is right
  kUndecided,      // a tie the evidence cannot break: no culprit is named
  kCallSite,       // each rank's own earlier calls at the same call site: the wrong side changed
  kPattern,        // the right side repeats the calls that came before; the wrong one breaks them
  kPeerSizeAbort,  // Gloo aborted a rank of one side (it got more than it posted): larger is wrong
};

// Each tied rank's own earlier call at the call site of the mismatch (TieBreak::kCallSite).
struct SiteHistory {
  std::string call_site;
  std::vector<int> kept, changed;  // called there what they called there before, or not
  Signature before;                // what every tied rank called there last time
  int64_t before_seq = -1;         // that call's seq on the first kept rank
};

// The calls before a tied mismatch that decided it (TieBreak::kPattern).
struct CallPattern {
  int64_t diverged_seq = -1;  // the first call (seq of the right side) where the ranks differ
  int period = 0;             // the calls before repeat every `period` calls
  Signature expected;         // what the pattern calls for at the divergence
  std::string expected_site;
  std::vector<int> followed, broke;  // the ranks that follow the pattern there, and the others
};

struct Mismatch {
  MismatchKind kind = MismatchKind::kNone;
  int64_t seq = -1;                // seq of the majority's first rank
  bool by_collective_seq = false;  // compared by collective_seq (p2p calls shift seq)
  int64_t collective_seq = -1;
  int majority_first_rank = -1;
  std::vector<MismatchGroup> groups;  // by signature
  std::vector<int> culprits;
  TieBreak tie = TieBreak::kNone;
  SiteHistory site;
  CallPattern pattern;
  std::string pg;  // the process group compared ("0": the default one); "" unknown
  int64_t pg_seq = -1;
  // A send and the receive it pairs with (FindP2PMismatch): groups[0] is the sender's send (the
  // culprit), groups[1] the receiver's recv; seq is the receiver's.
  bool p2p = false;
};

// Ranks waiting in collectives of different process groups, each for peers that wait in another:
// a deadlock of call order, not a stall of one rank.
struct GroupWait {
  int rank = -1;
  std::string pg;
  int64_t pg_seq = -1;
  int64_t seq = -1;
  std::string op, call_site;
};

// The process group of the collective in question, where the ranks call more than one group:
// then ranks line up by that group's pg_seq, since their own seqs count other groups' calls too.
// Ranks outside the group are not placed relative to it.
struct GroupCollective {
  std::string pg;          // "" when ranks were matched by seq (one group, or no group recorded)
  std::string desc;        // torch's description of it ("mesh_tp"), "" when none was recorded
  std::vector<int> ranks;  // its members (global ranks)
  int64_t pg_seq = -1;
  bool matched() const { return !pg.empty(); }
};

// Why a rank is a hang culprit, strongest first.
enum class CulpritReason {
  kNeverEntered,       // missing from the frontier collective
  kNamedByWatchdog,    // a watchdog named it missing and it left no record
  kUnresponsive,       // did not answer the dump request, or stopped
  kStayedBehind,       // still in the collective that the others completed
  kLeftNoRecord,       // no flight recorder while the others wait
  kExitedWhileWaited,  // gone while the others wait for it
  kOtherPhase,         // telemetry shows it doing something else
  kQuietLongest,       // between collectives: its activity stopped first
  kUnstated,           // found by a rule above, nothing more to say about it
};

// How a hang of programs without a flight recorder was judged.
enum class UnlinkedJudgement {
  kNone,
  kStillRunning,       // the others exited
  kOutsideCollective,  // by stacks: the others wait inside a collective
  kOddStackOut,        // by stack activity: not doing what everybody else does
  kSilentLongest,      // by output times
};

struct RankPlace {
  RankState state = RankState::kUnknown;
  bool stopped = false;     // also SIGSTOPped
  int64_t waiting_ms = -1;  // inside the collective in question
};

struct Verdict {
  DiagnosisKind kind = DiagnosisKind::kIncomplete;
  HangKind hang_kind = HangKind::kNone;
  std::vector<int> culprits;
  std::map<int, CulpritReason> culprit_reasons;  // hangs with a flight recorder
  int64_t seq = -1;
  Collective collective;
  std::vector<int> entered, missing, unknown;
  std::set<int> stale;  // unresponsive, last heartbeat too old to place
  int64_t frontier = -1;
  // Hang or failure: the group `frontier` was matched in (the first waiting rank's call at it),
  // and the ranks outside it, which are in none of entered, missing, stale.
  GroupCollective group;
  std::vector<int> outside;
  bool p2p_not_compared = false;  // send/recv without collective_seq: no mismatch check
  Mismatch mismatch;

  // Failure. A lost node (multi-node) is the root cause unless a rank of a surviving node failed
  // by itself (its own error or OOM, not an exit that the loss explains): then root is -1.
  int lost_node = -1;
  std::string lost_node_label;  // "node 1 (host)"
  std::vector<int> lost_ranks;  // the ranks lost with it
  int root = -1;
  bool root_inside = false;       // it had entered `seq`
  bool root_record_lost = false;  // its own record died with it; the others show `seq`
  std::vector<int> left_waiting;  // ranks left inside `seq`

  // Hang at a collective
  std::vector<int> waiting, done;  // of `entered`

  // Hang without a flight recorder
  UnlinkedJudgement unlinked = UnlinkedJudgement::kNone;
  std::vector<int> running, in_collective, elsewhere;
  StackActivity odd_activity = StackActivity::kNone, usual_activity = StackActivity::kNone;

  // The quiet-longest or silent-longest culprits are a tie: their silences differ by less than
  // kTieMs (or a tenth of the silence), too little to tell them apart under load.
  bool tie = false;

  // Hang: ranks wait in different process groups' collectives (HangKind::kInCollective).
  std::vector<GroupWait> deadlock;

  std::vector<RankPlace> places;  // index == rank
};

inline constexpr int64_t kTieMs = 1000;

struct InferenceInput {
  std::optional<int> launcher_exit_code;
  int64_t now_unix_ms = 0;      // 0 offline
  bool hang_suspected = false;  // a live monitor saw a stall
};

Verdict Infer(const std::vector<RankFacts>& facts, const InferenceInput& input);

// How long `rank` has been inside `entry` (-1 when not in it), by its own clock.
int64_t WaitingMs(const RankFacts& facts, const FlightEntry* entry);

}  // namespace dlaunch::launcher
