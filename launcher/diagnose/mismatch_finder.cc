#include "launcher/diagnose/mismatch_finder.h"

#include <algorithm>
#include <climits>
#include <map>
#include <tuple>

namespace dlaunch::launcher {
namespace {

// One collective as ranks line it up: (process group, its pg_seq), or ("", seq or collective_seq).
struct CallKey {
  std::string pg;
  int64_t index = -1;
  bool operator<(const CallKey& o) const { return std::tie(pg, index) < std::tie(o.pg, o.index); }
};

class MismatchFinder {
 public:
  MismatchFinder(const std::vector<RankFacts>& facts, Mismatch* m, bool* p2p_not_compared)
      : f_(facts), m_(m), p2p_not_compared_(p2p_not_compared) {}

  // How collectives line up across ranks: per process group by pg_seq, else by collective_seq,
  // else by seq. The agent counts send/recv in pg_seq, so pg_seq lines collectives up only without
  // them; torch's records count collectives alone in it (send/recv carry pg_seq -1). False when
  // send/recv shift every count the recorders wrote.
  bool ChooseKeys(bool* by_pg, bool* by_collective_seq) const {
    bool saw_p2p = false;
    bool p2p_in_pg_seq = false;
    bool have_collective_seq = true;
    bool have_pg_seq = true;
    for (const RankFacts& r : f_) {
      if (!r.flight) continue;
      for (const FlightEntry& e : r.flight->entries) {
        if (rundir::IsPointToPoint(e.op)) {
          saw_p2p = true;
          p2p_in_pg_seq = p2p_in_pg_seq || e.pg_seq >= 0;
        } else {
          have_collective_seq = have_collective_seq && e.collective_seq >= 0;
          have_pg_seq = have_pg_seq && e.pg_seq >= 0 && !e.pg.empty();
        }
      }
    }
    *by_pg = have_pg_seq && !p2p_in_pg_seq;
    *by_collective_seq = !*by_pg && saw_p2p && have_collective_seq;
    return !saw_p2p || *by_pg || *by_collective_seq;
  }

  // The lowest collective at which ranks' flight recorders disagree. Collectives line up across
  // ranks per process group by the group's own count (pg_seq), as torch's fr_trace matches them:
  // two groups' calls interleave differently on different ranks. Without pg_seq, by seq, unless
  // send/recv calls (which count in seq) differ between ranks; then by collective_seq, when the
  // recorder wrote it.
  const FlightEntry* Find() {
    bool by_pg = false, by_collective_seq = false;
    if (!ChooseKeys(&by_pg, &by_collective_seq)) {
      *p2p_not_compared_ = true;
      return nullptr;
    }
    std::map<CallKey, std::map<int, const FlightEntry*>> by_key;  // key -> rank -> entry
    for (const RankFacts& r : f_) {
      if (!r.flight) continue;
      for (const FlightEntry& e : r.flight->entries) {
        if (rundir::IsPointToPoint(e.op)) continue;
        const CallKey key = by_pg               ? CallKey{e.pg, e.pg_seq}
                            : by_collective_seq ? CallKey{"", e.collective_seq}
                                                : CallKey{"", e.seq};
        by_key[key][r.rank] = &e;
      }
    }
    // The lowest collective first: keys in the order of their earliest seq on any rank.
    std::vector<std::pair<int64_t, const CallKey*>> order;
    for (const auto& [key, entries] : by_key) {
      int64_t lowest = INT64_MAX;
      for (const auto& [rank, e] : entries) lowest = std::min(lowest, e->seq);
      order.push_back({lowest, &key});
    }
    std::sort(order.begin(), order.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [lowest, key] : order) {
      const std::map<int, const FlightEntry*>& entries = by_key.at(*key);
      std::map<Signature, std::vector<int>> groups;
      for (const auto& [rank, e] : entries) groups[SignatureOf(*e)].push_back(rank);
      if (groups.size() < 2) continue;
      Mismatch& m = *m_;
      auto best = PickRightSide(groups, *key, by_key, &m);
      m.kind = MismatchKind::kSizeOrSyntax;
      for (auto it = groups.begin(); it != groups.end(); ++it) {
        const FlightEntry* first = entries.at(it->second.front());
        const bool wrong = best != groups.end() && it != best;
        m.groups.push_back(
            {it->first, it->second, wrong, first->seq, first->bytes, first->call_site});
        if (wrong) m.culprits.insert(m.culprits.end(), it->second.begin(), it->second.end());
      }
      // The kind, from the right side's view or (a tie) from any two sides.
      const Signature& ref = best != groups.end() ? best->first : groups.begin()->first;
      for (const auto& [signature, ranks] : groups) {
        if (signature.op != ref.op) {
          m.kind = MismatchKind::kCollectiveType;
        } else if (signature.dtype != ref.dtype && m.kind != MismatchKind::kCollectiveType) {
          m.kind = MismatchKind::kDtype;
        }
      }
      std::sort(m.culprits.begin(), m.culprits.end());
      const std::vector<int>& right = best != groups.end() ? best->second : groups.begin()->second;
      const FlightEntry* good = entries.at(right.front());
      m.seq = good->seq;
      m.by_collective_seq = by_collective_seq;
      m.collective_seq = by_collective_seq ? key->index : good->collective_seq;
      if (by_pg) {
        m.pg = key->pg;
        m.pg_seq = key->index;
      }
      m.majority_first_rank = right.front();
      return good;
    }
    return nullptr;
  }

  // The side of a mismatch taken as right: the majority. An even split is a tie, broken only by
  // evidence, strongest first: each rank's own earlier calls at the same call site (SiteHistory),
  // the calls before it (TiePattern), else a rank of one side that Gloo aborted because a peer
  // sent it more than it posted (the larger side is taken as wrong: the abort itself only says
  // the sizes differ, so it comes last). Returns groups.end() for a tie nothing breaks.
  using SignatureGroups = std::map<Signature, std::vector<int>>;
  using ByKey = std::map<CallKey, std::map<int, const FlightEntry*>>;
  SignatureGroups::const_iterator PickRightSide(const SignatureGroups& groups, const CallKey& key,
                                                const ByKey& by_key, Mismatch* m) const {
    auto best = groups.begin();
    for (auto it = groups.begin(); it != groups.end(); ++it) {
      if (it->second.size() > best->second.size()) best = it;
    }
    std::vector<SignatureGroups::const_iterator> largest;
    for (auto it = groups.begin(); it != groups.end(); ++it) {
      if (it->second.size() == best->second.size()) largest.push_back(it);
    }
    if (largest.size() == 1) return best;
    if (const int side = SiteHistory(largest, key, by_key, m); side >= 0) {
      m->tie = TieBreak::kCallSite;
      return largest[side];
    }
    if (const int side = TiePattern(largest, key, by_key, m); side >= 0) {
      m->tie = TieBreak::kPattern;
      return largest[side];
    }
    std::vector<SignatureGroups::const_iterator> aborted;
    for (auto it : largest) {
      if (std::any_of(it->second.begin(), it->second.end(),
                      [&](int r) { return f_[r].aborted_by_peer_size(); })) {
        aborted.push_back(it);
      }
    }
    if (aborted.size() == 1) {
      m->tie = TieBreak::kPeerSizeAbort;
      return aborted.front();
    }
    m->tie = TieBreak::kUndecided;
    return groups.end();
  }

  // A tie where every tied rank calls from one call site, settled by each rank's own last call
  // there: the ranks that call what they called there before are right when the ranks of every
  // other side called something else than before (a size that a loop kept for steps changed on
  // one rank). Returns the right side (its index in `largest`), or -1 when the call sites differ,
  // a rank has no earlier call there, the ranks disagreed there before, or more than one side
  // (or none) kept its call.
  int SiteHistory(const std::vector<SignatureGroups::const_iterator>& largest, const CallKey& key,
                  const ByKey& by_key, Mismatch* m) const {
    const std::map<int, const FlightEntry*>& at = by_key.at(key);
    std::vector<int> ranks;
    for (auto it : largest) ranks.insert(ranks.end(), it->second.begin(), it->second.end());
    const std::string& site = at.at(ranks.front())->call_site;
    if (site.empty()) return -1;
    for (int r : ranks) {
      if (at.at(r)->call_site != site) return -1;
    }
    std::map<int, const FlightEntry*> previous;  // each rank's last call at `site` before `key`
    for (auto k = by_key.lower_bound(CallKey{key.pg, INT64_MIN}); k != by_key.end(); ++k) {
      if (k->first.pg != key.pg || !(k->first < key)) break;
      for (int r : ranks) {
        auto e = k->second.find(r);
        if (e != k->second.end() && e->second->call_site == site) previous[r] = e->second;
      }
    }
    if (previous.size() != ranks.size()) return -1;
    const Signature before = SignatureOf(*previous.begin()->second);
    std::vector<int> kept, changed;
    for (int r : ranks) {
      if (!(SignatureOf(*previous[r]) == before)) return -1;
      (SignatureOf(*at.at(r)) == before ? kept : changed).push_back(r);
    }
    std::sort(kept.begin(), kept.end());
    std::sort(changed.begin(), changed.end());
    for (size_t side = 0; side < largest.size() && !changed.empty(); ++side) {
      if (largest[side]->second != kept) continue;
      m->site = {site, kept, changed, before, previous[kept.front()]->seq};
      return static_cast<int>(side);
    }
    return -1;
  }

  // The calls that led up to a tied mismatch: where the tied ranks first differ (the signature or
  // the call site; an extra call at a line of its own shows there, before the seqs disagree), and
  // whether what came before repeats with some period. The side whose call there continues the
  // repetition is right; the side that breaks it skipped, added or changed a call. Returns the
  // right side (its index in `largest`), or -1 when the history is too short, does not repeat, or
  // does not single out one side.
  int TiePattern(const std::vector<SignatureGroups::const_iterator>& largest, const CallKey& key,
                 const ByKey& by_key, Mismatch* m) const {
    std::vector<int> ranks;
    for (auto it : largest) ranks.insert(ranks.end(), it->second.begin(), it->second.end());
    // Every tied rank's calls of this key's group, up to and including the key.
    std::map<int, std::vector<const FlightEntry*>> calls;
    for (const auto& [k, entries] : by_key) {
      if (k.pg != key.pg || k.index > key.index) continue;
      for (int r : ranks) {
        auto e = entries.find(r);
        calls[r].push_back(e == entries.end() ? nullptr : e->second);
      }
    }
    const size_t n = calls.begin()->second.size();
    auto same = [](const FlightEntry* a, const FlightEntry* b) {
      return a && b && SignatureOf(*a) == SignatureOf(*b) && a->call_site == b->call_site;
    };
    // A ring (or the agent's flight tail) keeps each rank's newest calls only: the comparison
    // starts where every tied rank still holds its calls.
    size_t first = 0;
    while (first + 1 < n && std::any_of(ranks.begin(), ranks.end(),
                                        [&](int r) { return calls[r][first] == nullptr; })) {
      ++first;
    }
    size_t diverged = n - 1;
    for (size_t i = first; i < n; ++i) {
      bool all_same = true;
      for (int r : ranks) all_same = all_same && same(calls[r][i], calls[ranks.front()][i]);
      if (!all_same) {
        diverged = i;
        break;
      }
    }
    const std::vector<const FlightEntry*>& before = calls[ranks.front()];
    for (size_t period = 1; first + 2 * period <= diverged; ++period) {
      bool repeats = true;
      for (size_t j = diverged - period; j < diverged && repeats; ++j) {
        repeats = same(before[j], before[j - period]);
      }
      if (!repeats) continue;
      const FlightEntry* expected = before[diverged - period];
      std::vector<int> followed, broke;
      for (int r : ranks) (same(calls[r][diverged], expected) ? followed : broke).push_back(r);
      if (followed.empty()) {
        // Every side calls from a new line there: what it calls still follows the pattern or not.
        broke.clear();
        for (int r : ranks) {
          const FlightEntry* e = calls[r][diverged];
          (e && SignatureOf(*e) == SignatureOf(*expected) ? followed : broke).push_back(r);
        }
      }
      if (followed.empty() || broke.empty()) return -1;
      // The followers must be exactly one side of the tie at the mismatch itself.
      for (size_t side = 0; side < largest.size(); ++side) {
        if (largest[side]->second != followed) continue;
        m->pattern.diverged_seq = calls[followed.front()][diverged]->seq;
        m->pattern.period = static_cast<int>(period);
        m->pattern.expected = SignatureOf(*expected);
        m->pattern.expected_site = expected->call_site;
        m->pattern.followed = followed;
        m->pattern.broke = broke;
        return static_cast<int>(side);
      }
      return -1;
    }
    return -1;
  }

 private:
  const std::vector<RankFacts>& f_;
  Mismatch* m_;
  bool* p2p_not_compared_;
};

}  // namespace

Signature SignatureOf(const FlightEntry& e) {
  // alltoallv's counts differ between ranks by design (each rank's own split sizes).
  const int64_t count = e.op == "alltoallv" ? -1 : e.count;
  return Signature{e.op, e.dtype, count, e.op == "broadcast" ? e.root : -1};
}

const FlightEntry* FindFirstMismatch(const std::vector<RankFacts>& facts, Mismatch* m,
                                     bool* p2p_not_compared) {
  return MismatchFinder(facts, m, p2p_not_compared).Find();
}

// Sends and receives pair up per (group, sender, receiver) in the order each side called
// them: the k-th send from A to B is the k-th receive on B from A. Only ranks whose recorder
// still holds every call since their first (seq 0 on, no gap) take part; a ring that wrapped
// would pair the wrong calls. The first pair whose dtype or size differs is the mismatch, and
// its sender the culprit: the receiver posted what the exchange calls for, the sender chose
// what to send (Gloo aborts a receiver that gets more than it posted).
const FlightEntry* FindFirstP2PMismatch(const std::vector<RankFacts>& facts, Mismatch* out) {
  auto whole = [](const RankFacts& r) {
    if (!r.flight || r.flight->entries.empty()) return false;
    const std::vector<FlightEntry>& es = r.flight->entries;
    return es.front().seq == 0 && es.back().seq == static_cast<int64_t>(es.size()) - 1;
  };
  using Pair = std::tuple<std::string, int, int>;  // group, sender, receiver
  std::map<Pair, std::vector<const FlightEntry*>> sends, recvs;
  for (const RankFacts& r : facts) {
    if (!whole(r)) continue;
    for (const FlightEntry& e : r.flight->entries) {
      if (e.op == "send") sends[{e.pg, r.rank, e.peer}].push_back(&e);
      if (e.op == "recv") recvs[{e.pg, e.peer, r.rank}].push_back(&e);
    }
  }
  const FlightEntry *send = nullptr, *recv = nullptr;
  int sender = -1, receiver = -1;
  std::string pg;
  for (const auto& [key, sent] : sends) {
    auto it = recvs.find(key);
    if (it == recvs.end()) continue;
    const size_t n = std::min(sent.size(), it->second.size());
    for (size_t k = 0; k < n; ++k) {
      const FlightEntry& s = *sent[k];
      const FlightEntry& r = *it->second[k];
      if (s.dtype == r.dtype && s.count == r.count) continue;
      if (send == nullptr || s.seq < send->seq) {
        send = &s;
        recv = &r;
        std::tie(pg, sender, receiver) = key;
      }
      break;
    }
  }
  if (send == nullptr) return nullptr;
  Mismatch& m = *out;
  m.p2p = true;
  m.kind = send->dtype != recv->dtype ? MismatchKind::kDtype : MismatchKind::kSizeOrSyntax;
  m.groups.push_back({SignatureOf(*send), {sender}, true, send->seq, send->bytes, send->call_site});
  m.groups.push_back(
      {SignatureOf(*recv), {receiver}, false, recv->seq, recv->bytes, recv->call_site});
  m.culprits = {sender};
  m.seq = recv->seq;
  m.majority_first_rank = receiver;
  m.pg = pg;
  return recv;
}

}  // namespace dlaunch::launcher
