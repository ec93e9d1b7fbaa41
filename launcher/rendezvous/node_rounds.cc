#include "launcher/rendezvous/node_rounds.h"

#include <algorithm>
#include <limits>

namespace dlaunch::launcher {

NodeRounds::NodeRounds(RoundConfig config, int64_t now) : config_(config), opened_unix_ms_(now) {}

std::string NodeRounds::Join(const RoundMember& member, int64_t now) {
  for (const auto& j : joined_) {
    if (j.member_id == member.member_id) return "";
    if (member.requested_rank >= 0 && j.requested_rank == member.requested_rank) {
      return "node rank " + std::to_string(member.requested_rank) + " is taken by " + j.host +
             " (give each launcher its own --node-rank, or none)";
    }
  }
  joined_.push_back(member);
  if (!min_reached_unix_ms_ && static_cast<int>(joined_.size()) >= config_.min_nodes) {
    min_reached_unix_ms_ = now;
  }
  return "";
}

bool NodeRounds::Joined(int member_id) const {
  return std::any_of(joined_.begin(), joined_.end(),
                     [&](const RoundMember& m) { return m.member_id == member_id; });
}

bool NodeRounds::ReadyToClose(int64_t now, const std::set<int>& connected) const {
  if (!forming_ || !min_reached_unix_ms_) return false;
  // Node 0 is part of every round: the job's ranks start from it.
  if (!Joined(0)) return false;
  if (static_cast<int>(joined_.size()) >= config_.max_nodes) return true;
  if (now - *min_reached_unix_ms_ >= config_.last_call_timeout.count()) return true;
  // The first round waits for nodes nobody knows yet; a later one only for those still there.
  if (round_ == 0) return false;
  return std::all_of(connected.begin(), connected.end(), [&](int id) { return Joined(id); });
}

int64_t NodeRounds::NextDeadline() const {
  const int64_t join_deadline = opened_unix_ms_ + config_.join_timeout.count();
  if (!min_reached_unix_ms_) return join_deadline;
  return std::min(join_deadline, *min_reached_unix_ms_ + config_.last_call_timeout.count());
}

std::string NodeRounds::Failure(int64_t now) const {
  if (!forming_ || min_reached_unix_ms_ || now - opened_unix_ms_ < config_.join_timeout.count()) {
    return "";
  }
  // The node ranks nobody took: those not asked for when every node asked for one, else the
  // ranks join order would have given next.
  const bool all_asked = std::all_of(joined_.begin(), joined_.end(), [](const RoundMember& m) {
    return m.member_id == 0 || m.requested_rank >= 0;
  });
  std::string absent;
  int count = 0;
  for (int r = all_asked ? 0 : static_cast<int>(joined_.size()); r < config_.min_nodes; ++r) {
    const bool taken = std::any_of(joined_.begin(), joined_.end(), [&](const RoundMember& m) {
      return (m.member_id == 0 ? 0 : m.requested_rank) == r;
    });
    if (all_asked && taken) continue;
    absent += (absent.empty() ? "" : ",") + std::to_string(r);
    ++count;
  }
  const bool fixed = config_.min_nodes == config_.max_nodes;
  return "node rendezvous timed out after " + std::to_string(config_.join_timeout.count() / 1000) +
         " s: " + std::to_string(joined_.size()) + " of " + (fixed ? "" : "at least ") +
         std::to_string(config_.min_nodes) + " nodes joined; node" + (count > 1 ? "s " : " ") +
         absent + " never joined";
}

void NodeRounds::Close() {
  std::vector<RoundMember> order = joined_;
  // Node 0 first, then the ranks asked for, then join order (stable).
  std::stable_sort(order.begin(), order.end(), [](const RoundMember& a, const RoundMember& b) {
    auto key = [](const RoundMember& m) {
      if (m.member_id == 0) return -1;
      return m.requested_rank >= 0 ? m.requested_rank : std::numeric_limits<int>::max();
    };
    return key(a) < key(b);
  });
  const size_t take = std::min<size_t>(order.size(), static_cast<size_t>(config_.max_nodes));
  members_.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(take));
  joined_.assign(order.begin() + static_cast<std::ptrdiff_t>(take), order.end());
  forming_ = false;
}

void NodeRounds::Open(int64_t now) {
  ++round_;
  forming_ = true;
  opened_unix_ms_ = now;
  min_reached_unix_ms_.reset();
  // Those left over from the last round (beyond MAX) are the first of this one.
  std::vector<RoundMember> waiting;
  waiting.swap(joined_);
  for (const auto& m : waiting) Join(m, now);
}

std::optional<int> NodeRounds::RankOf(int member_id) const {
  for (size_t i = 0; i < members_.size(); ++i)
    if (members_[i].member_id == member_id) return static_cast<int>(i);
  return std::nullopt;
}

}  // namespace dlaunch::launcher
