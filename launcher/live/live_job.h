// The running job as the hang monitor sees it: the supervisor's processes merged with the
// coordinator's heartbeats, and other nodes' ranks as their agents report them (node statuses,
// and the Python agents' heartbeat files their nodes push).
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "launcher/diagnose/job_view.h"
#include "launcher/rendezvous/coordinator.h"
#include "launcher/supervision/supervisor.h"

namespace dlaunch::launcher {

class LiveJobView : public JobView {
 public:
  // `world_size` ranks; those not supervised here (other nodes') are known by heartbeats only.
  // A rank runs the Python agent when the agent said so as it started (its first heartbeat, sent
  // down its pipe, relayed by its node): only those ranks' heartbeat files are read, so a native
  // job's thousand rank folders are not read at every tick, and a Python rank is found however
  // its interpreter was started (`script.py`, `-- python3 script.py`, `-m`, a wrapper).
  LiveJobView(CoordinatorHandler* coordinator, Supervisor* supervisor, int world_size,
              std::string run_dir);

  std::vector<RankLiveState> Ranks() override;
  // Some rank said it runs the Python agent (its heartbeats come every 200 ms, not every
  // heartbeat interval), as of the last Ranks(). Thread-safe.
  bool agents_seen() const { return agents_seen_; }
  void RequestDump(const std::string& reason) override;
  std::map<int, std::string> RemoteStacks(const std::vector<int>& ranks,
                                          std::chrono::milliseconds timeout) override;
  std::string run_dir() const override { return run_dir_; }
  std::optional<std::vector<rundir::StragglerVerdict>> Stragglers() override;
  // Node 0's detector is on: its verdicts so far, kept for Stragglers(). Thread-safe.
  void SetStragglers(std::vector<rundir::StragglerVerdict> verdicts);

 private:
  std::string RankDir(int rank) const;

  CoordinatorHandler* coordinator_;
  Supervisor* supervisor_;
  int world_size_;
  std::string run_dir_;
  std::atomic<bool> agents_seen_{false};
  std::mutex stacks_mu_;  // one STACKS at a time: a dump's and the hang monitor's
  int stacks_id_ = 0;     // of the last STACKS command
  std::mutex stragglers_mu_;
  std::optional<std::vector<rundir::StragglerVerdict>> stragglers_;  // none: no detector
};

// Asks the agent of each of `supervisor`'s running ranks for flight.json and py_stacks.txt now
// (the agent's dump_request): `dir_of` gives a rank's folder, "" for none on this node. Blocks
// for one small write per rank; never throws.
void RequestRunningRankDumps(const Supervisor& supervisor,
                             const std::function<std::string(int rank)>& dir_of,
                             const std::string& reason);

// v1::RankStatus (the wire) -> core::RankStatus (what libdlaunch and the analysis use).
core::RankStatus FromProto(const v1::RankStatus& s);

}  // namespace dlaunch::launcher
