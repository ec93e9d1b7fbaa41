// The hang step of the inference layer for programs that call several process groups (a data- x
// tensor-parallel mesh): a rank's seq counts every call of every group it is in, so the ranks of
// one group reach its collectives at different seqs, and the same seq on two ranks may be calls
// of different groups. The collective in question is matched in the group of the waiting rank's
// call, by that group's pg_seq, among that group's members. Pure computation; never throws.
#pragma once

#include <cstdint>
#include <vector>

#include "launcher/diagnose/inference.h"

namespace dlaunch::launcher {

// The group of the first waiting rank's call at `seq` (a rank not through it that recorded it,
// fresh ranks first), when some rank recorded a call of another group; unmatched (pg "") when
// all calls are of one group, or the call names no group: then ranks line up by seq as before.
GroupCollective FrontierGroup(const std::vector<RankFacts>& facts, int64_t seq);

// The oldest unfinished collective of every rank still there, when some wait in one process
// group's collective that a peer waiting in another group's has not called (and the reverse):
// each waits for the other, so none can go on; they call the groups in different orders.
std::vector<GroupWait> CrossGroupDeadlock(const std::vector<RankFacts>& facts);

// Where one rank stands at call `group.pg_seq` of `group`.
enum class GroupPlace {
  kOutside,  // not a member
  kEntered,  // its call there is not completed
  kDone,     // completed it, or called the group past it
  kBefore,   // its record of the group ends before it
  kUnknown,  // a member without a flight record
};
struct GroupStanding {
  GroupPlace place = GroupPlace::kUnknown;
  const FlightEntry* entry = nullptr;  // its call there, when recorded
  int64_t last_pg_seq = -1;            // the highest pg_seq of the group in its record
};
GroupStanding StandingIn(const RankFacts& rank, const GroupCollective& group);

}  // namespace dlaunch::launcher
