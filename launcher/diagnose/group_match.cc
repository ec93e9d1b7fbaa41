#include "launcher/diagnose/group_match.h"

#include <algorithm>
#include <map>
#include <set>

namespace dlaunch::launcher {
namespace {

bool Waits(const FlightEntry* e) {
  return e != nullptr && e->state != rundir::OpState::kCompleted && !e->pg.empty() &&
         e->pg_seq >= 0 && !rundir::IsPointToPoint(e->op);
}

// The waiting rank at `seq` and its call there: fresh ranks first, then the lowest rank.
const RankFacts* WaitingRank(const std::vector<RankFacts>& facts, int64_t seq,
                             const FlightEntry** call) {
  for (bool fresh : {true, false}) {
    for (const RankFacts& r : facts) {
      if (!r.flight || r.last_completed >= seq || r.unresponsive() == fresh) continue;
      *call = r.flight->Find(seq);
      if (Waits(*call)) return &r;
    }
  }
  return nullptr;
}

bool OtherGroupCalled(const std::vector<RankFacts>& facts, const std::string& pg) {
  for (const RankFacts& r : facts) {
    if (!r.flight) continue;
    for (const FlightEntry& e : r.flight->entries) {
      if (!e.pg.empty() && e.pg != pg) return true;
    }
  }
  return false;
}

// Its members as the waiting rank's dump lists them, else as another member's does (the same
// name may be another group on a rank outside it), else every rank for the default group, else
// the ranks that recorded a call of it.
void FillMembers(const std::vector<RankFacts>& facts, const RankFacts& waiting,
                 GroupCollective* g) {
  std::vector<const RankFacts*> order = {&waiting};
  for (const RankFacts& r : facts) order.push_back(&r);
  for (const RankFacts* r : order) {
    if (!r->flight) continue;
    auto it = r->flight->process_groups.find(g->pg);
    if (it == r->flight->process_groups.end()) continue;
    const std::vector<int>& ranks = it->second.ranks;
    if (std::find(ranks.begin(), ranks.end(), waiting.rank) == ranks.end()) continue;
    g->ranks = ranks;
    g->desc = it->second.desc;
    std::sort(g->ranks.begin(), g->ranks.end());
    return;
  }
  for (const RankFacts& r : facts) {
    bool called = g->pg == "0";
    for (size_t i = 0; r.flight && !called && i < r.flight->entries.size(); ++i) {
      called = r.flight->entries[i].pg == g->pg;
    }
    if (called) g->ranks.push_back(r.rank);
  }
}

}  // namespace

GroupCollective FrontierGroup(const std::vector<RankFacts>& facts, int64_t seq) {
  GroupCollective g;
  const FlightEntry* call = nullptr;
  const RankFacts* waiting = seq >= 0 ? WaitingRank(facts, seq, &call) : nullptr;
  if (waiting == nullptr || !OtherGroupCalled(facts, call->pg)) return g;
  g.pg = call->pg;
  g.pg_seq = call->pg_seq;
  FillMembers(facts, *waiting, &g);
  return g;
}

std::vector<GroupWait> CrossGroupDeadlock(const std::vector<RankFacts>& facts) {
  std::map<int, const FlightEntry*> waits;
  for (const RankFacts& r : facts) {
    // A rank the launcher tore down, or whose own watchdog ended it, was still waiting where its
    // record ends: offline reads the same deadlock a live diagnosis saw.
    const bool ended_waiting = r.torn_down || r.watchdog_exit;
    if (!r.flight || (r.exited && !ended_waiting) || r.unresponsive()) continue;
    for (const FlightEntry& e : r.flight->entries) {
      if (rundir::IsPointToPoint(e.op) || e.pg.empty() || e.pg_seq < 0) continue;
      if (e.state != rundir::OpState::kCompleted) {
        waits[r.rank] = &e;
        break;
      }
    }
  }
  auto called = [&](int rank, const FlightEntry& w) {
    for (const FlightEntry& e : facts[rank].flight->entries) {
      if (e.pg == w.pg && e.pg_seq >= w.pg_seq) return true;
    }
    return false;
  };
  // Whether `rank` is in the group of `waiter`'s call `w`, as the waiter's dump lists its
  // groups (a member when it lists none): a rank outside a group never calls it.
  auto member = [&](int rank, int waiter, const FlightEntry& w) {
    const auto& groups = facts[waiter].flight->process_groups;
    const auto it = groups.find(w.pg);
    return it == groups.end() || std::find(it->second.ranks.begin(), it->second.ranks.end(),
                                           rank) != it->second.ranks.end();
  };
  std::set<int> locked;
  for (const auto& [a, wa] : waits) {
    for (const auto& [b, wb] : waits) {
      if (a < b && wa->pg != wb->pg && member(b, a, *wa) && member(a, b, *wb) && !called(b, *wa) &&
          !called(a, *wb)) {
        locked.insert({a, b});
      }
    }
  }
  std::vector<GroupWait> out;
  for (int r : locked) {
    const FlightEntry& w = *waits.at(r);
    out.push_back({r, w.pg, w.pg_seq, w.seq, w.op, w.call_site});
  }
  return out;
}

GroupStanding StandingIn(const RankFacts& r, const GroupCollective& g) {
  GroupStanding s;
  if (!std::binary_search(g.ranks.begin(), g.ranks.end(), r.rank)) {
    s.place = GroupPlace::kOutside;
    return s;
  }
  if (!r.flight) return s;
  for (const FlightEntry& e : r.flight->entries) {
    if (e.pg != g.pg || rundir::IsPointToPoint(e.op) || e.pg_seq < 0) continue;
    s.last_pg_seq = std::max(s.last_pg_seq, e.pg_seq);
    if (e.pg_seq == g.pg_seq) s.entry = &e;
  }
  if (s.entry != nullptr) {
    s.place =
        s.entry->state == rundir::OpState::kCompleted ? GroupPlace::kDone : GroupPlace::kEntered;
  } else {
    s.place = s.last_pg_seq > g.pg_seq ? GroupPlace::kDone : GroupPlace::kBefore;
  }
  return s;
}

}  // namespace dlaunch::launcher
