// The node rendezvous of an elastic job, torchrun's c10d semantics: one round per attempt; a round
// closes when MAX nodes joined, or MIN joined and the last-call wait passed (or, after the first
// round, every node still connected is back); it fails when MIN did not join within the join
// timeout. Node ranks: the coordinator's node 0, then the ranks asked for, then join order. Plain
// logic with the time passed in; the coordinator holds it under its lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dlaunch::launcher {

struct RoundConfig {
  int min_nodes = 1;
  int max_nodes = 1;
  std::chrono::milliseconds join_timeout{600000};
  std::chrono::milliseconds last_call_timeout{30000};
};

// A node in a round. Member 0 is node 0, the coordinator's own launcher.
struct RoundMember {
  int member_id = 0;
  std::string host;
  std::string doctor_json;
  int requested_rank = -1;  // --node-rank, -1: any
};

class NodeRounds {
 public:
  NodeRounds(RoundConfig config, int64_t now);

  const RoundConfig& config() const { return config_; }
  // The round being formed or, once closed, run (= the attempt).
  int round() const { return round_; }
  bool forming() const { return forming_; }

  // A new member id, never 0 and never given twice.
  int NewMemberId() { return next_member_id_++; }
  // Into the forming round. Returns "" or why the node cannot join (its rank is taken).
  std::string Join(const RoundMember& member, int64_t now);
  bool Joined(int member_id) const;
  // How many joined the forming round.
  int joined() const { return static_cast<int>(joined_.size()); }

  // Whether the forming round can close now. `connected`: members of the last round that are
  // still connected; once each of them is back there is nobody left to wait for.
  bool ReadyToClose(int64_t now, const std::set<int>& connected) const;
  // When ReadyToClose may next turn true by time alone (the last call's end, or the join
  // deadline); a waiter sleeps until then at most.
  int64_t NextDeadline() const;
  // The join timeout passed with fewer than MIN nodes: the failure's message, else "".
  std::string Failure(int64_t now) const;

  // Closes the forming round: the first MAX joiners become its members, by node rank; the
  // others stay for the next round.
  void Close();
  // Opens round + 1 for joining (after an attempt ended with another to follow).
  void Open(int64_t now);

  // The members of the last closed round, index = node rank.
  const std::vector<RoundMember>& members() const { return members_; }
  std::optional<int> RankOf(int member_id) const;

 private:
  RoundConfig config_;
  int round_ = 0;
  bool forming_ = true;
  int next_member_id_ = 1;
  int64_t opened_unix_ms_ = 0;
  std::optional<int64_t> min_reached_unix_ms_;
  std::vector<RoundMember> joined_;   // the forming round's, in join order
  std::vector<RoundMember> members_;  // the closed round's, by node rank
};

}  // namespace dlaunch::launcher
