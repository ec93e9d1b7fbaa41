#include "launcher/diagnose/render_mismatch.h"

#include <algorithm>
#include <vector>

#include "core/base/format.h"

namespace dlaunch::launcher {

using base::FormatBytes;
using base::NameRanks;

std::string DescribeCollective(const std::string& op, const std::string& dtype, int64_t count,
                               int64_t bytes) {
  std::string out = op.empty() ? "?" : op;
  if (!dtype.empty()) out += " " + dtype;
  if (bytes >= 0) {
    out += " " + FormatBytes(bytes);
  } else if (count >= 0) {
    out += " x" + std::to_string(count);
  }
  return out;
}

namespace {

class MismatchRenderer {
 public:
  MismatchRenderer(const Mismatch& m, rundir::Diagnosis& d) : m_(m), d_(d) {}

  void Run() {
    const auto& m = m_;
    if (m.p2p) return PointToPointMismatch();
    if (m.by_collective_seq) {
      d_.details.push_back("compared by collective_seq (point-to-point calls shift seq): #" +
                           std::to_string(m.seq) + " is collective_seq " +
                           std::to_string(m.collective_seq) + " on rank " +
                           std::to_string(m.majority_first_rank));
    }
    std::string odd;
    std::vector<int> majority;
    for (const MismatchGroup& g : m.groups) {
      std::string what =
          DescribeCollective(g.signature.op, g.signature.dtype, g.signature.count, -1);
      if (g.signature.root >= 0) what += " root " + std::to_string(g.signature.root);
      if (g.bytes >= 0) what += " (" + FormatBytes(g.bytes) + ")";
      d_.details.push_back("  #" + std::to_string(g.seq) + " " + NameRanks(g.ranks) + ": " + what +
                           (g.call_site.empty() ? "" : " at " + g.call_site));
      if (g.culprit) {
        odd += (odd.empty() ? "" : "; ") + NameRanks(g.ranks) + " called " + what;
      } else {
        majority = g.ranks;
      }
    }
    if (m.tie == TieBreak::kUndecided) return MismatchTie();
    d_.headline = "MISMATCH at collective #" + std::to_string(m.seq) + " (" +
                  rundir::MismatchKindName(m.kind) + "): " + odd + " while " + NameRanks(majority) +
                  " called " + DescribeCollective(d_.op, d_.dtype, d_.count, -1);
    if (m.tie == TieBreak::kCallSite) {
      const SiteHistory& h = m.site;
      d_.headline += " (a tie, decided by each rank's own earlier calls at " + h.call_site + ": " +
                     NameRanks(h.changed) + " changed its call there)";
      d_.details.push_back(
          "the verdict rests on each rank's own calls at " + h.call_site + ": every rank called " +
          DescribeCollective(h.before.op, h.before.dtype, h.before.count, -1) +
          " there last time (#" + std::to_string(h.before_seq) + "); " + NameRanks(h.kept) +
          " called it again, " + NameRanks(h.changed) + " called something else");
    } else if (m.tie == TieBreak::kPattern) {
      const CallPattern& p = m.pattern;
      std::string expected =
          DescribeCollective(p.expected.op, p.expected.dtype, p.expected.count, -1) +
          (p.expected_site.empty() ? "" : " at " + p.expected_site);
      d_.headline += " (a tie, decided by the calls before it: " + NameRanks(p.broke) +
                     " broke the pattern at #" + std::to_string(p.diverged_seq) + ")";
      d_.details.push_back("the verdict rests on the calls before #" +
                           std::to_string(p.diverged_seq) + ": they repeat every " +
                           std::to_string(p.period) + " call(s), so " + expected + " came next; " +
                           NameRanks(p.followed) + " called it, " + NameRanks(p.broke) +
                           " did not (a skipped, extra or changed call)");
    } else if (m.tie == TieBreak::kPeerSizeAbort) {
      // The abort says only which side is larger; no earlier call told the sides apart.
      d_.details.push_back(
          "the verdict rests on Gloo's abort of a rank that received more bytes than it posted: "
          "the ranks split evenly and no earlier call tells them apart, so the side that sent "
          "more is taken as the wrong one");
    }
  }

  // A send whose receive on the peer was posted for another size or dtype: the sender is named.
  void PointToPointMismatch() {
    const auto& m = m_;
    const MismatchGroup& s = m.groups[0];
    const MismatchGroup& r = m.groups[1];
    auto what = [](const MismatchGroup& g) {
      std::string out = g.signature.dtype.empty() ? "" : " " + g.signature.dtype;
      if (g.signature.count >= 0) out += " x" + std::to_string(g.signature.count);
      return out + (g.bytes >= 0 ? " (" + FormatBytes(g.bytes) + ")" : "");
    };
    const std::string sender = std::to_string(s.ranks.front());
    const std::string receiver = std::to_string(r.ranks.front());
    d_.headline = "MISMATCH at send/recv (" + std::string(rundir::MismatchKindName(m.kind)) +
                  "): rank " + sender + " sent" + what(s) + " to rank " + receiver + " (its #" +
                  std::to_string(s.seq) + ") while rank " + receiver + " received" + what(r) +
                  " from it (its #" + std::to_string(r.seq) + ")";
    for (const MismatchGroup* g : {&s, &r}) {
      d_.details.push_back("  #" + std::to_string(g->seq) + " rank " +
                           std::to_string(g->ranks.front()) + ": " + g->signature.op + what(*g) +
                           (g->call_site.empty() ? "" : " at " + g->call_site));
    }
    d_.details.push_back("sends and receives are paired in the order each rank called them (" +
                         std::string(m.pg.empty() ? "" : "process group " + m.pg + ", ") +
                         "sender " + sender + ", receiver " + receiver +
                         "): the receiver posted what the exchange calls for, so the sender's "
                         "size is wrong");
  }

  // An even split that no evidence breaks: both sides, no culprit.
  void MismatchTie() {
    const auto& m = m_;
    // By their lowest rank: "rank 0 called ... while rank 1 called ...".
    std::vector<const MismatchGroup*> groups;
    for (const MismatchGroup& g : m.groups) groups.push_back(&g);
    std::sort(groups.begin(), groups.end(), [](const MismatchGroup* a, const MismatchGroup* b) {
      return a->ranks.front() < b->ranks.front();
    });
    std::string sides;
    for (const MismatchGroup* group : groups) {
      const MismatchGroup& g = *group;
      std::string what =
          DescribeCollective(g.signature.op, g.signature.dtype, g.signature.count, -1);
      if (g.signature.root >= 0) what += " root " + std::to_string(g.signature.root);
      sides += std::string(sides.empty() ? "" : " while ") + NameRanks(g.ranks) + " called " +
               what + (g.call_site.empty() ? "" : " at " + g.call_site);
    }
    d_.headline = "MISMATCH at collective #" + std::to_string(m.seq) + " (" +
                  rundir::MismatchKindName(m.kind) + "): " + sides + "; " +
                  (m.kind == MismatchKind::kCollectiveType ? "one of them skipped a call"
                                                           : "one of them is wrong") +
                  " (undecided: the ranks split evenly and nothing in the evidence tells which)";
  }

 private:
  const Mismatch& m_;
  rundir::Diagnosis& d_;
};

}  // namespace

void RenderMismatch(const Mismatch& mismatch, rundir::Diagnosis* d) {
  MismatchRenderer(mismatch, *d).Run();
}

}  // namespace dlaunch::launcher
