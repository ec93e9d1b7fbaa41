// Node 0's live view of the job, refreshed on the supervisor's tick and read by the status RPC
// and the metrics server on their own threads. A reader copies the latest document under a
// mutex and never waits for the job: a slow or hung client costs the job nothing.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "launcher/diagnose/job_view.h"
#include "launcher/live/live_snapshot.h"
#include "launcher/rendezvous/node_roster.h"
#include "launcher/straggler/straggler_detector.h"

namespace dlaunch::launcher {

// What node 0's coordinator knows of the job, beside its ranks.
struct LiveJobFacts {
  std::string run_id;
  std::string run_dir;
  std::string local_host;
  int attempt = 0;
  int restarts = 0;
  int world_size = 0;
  int nodes = 1;
  int64_t start_unix_ms = 0;
  std::string hang;     // the hang diagnosis' headline; "" none
  std::string failure;  // why the attempt failed; "" none
  std::vector<rundir::StragglerVerdict> stragglers;
  std::vector<StragglerScore> scores;  // index == rank; empty with detection off
};

class LiveStatus {
 public:
  // Builds the view from `ranks` (JobView::Ranks()), the other nodes' reports and `facts`, as of
  // `now_unix_ms`, and keeps it with its JSON and metrics texts. Call from one thread (the
  // supervisor's); does not block but for the readers' mutex.
  void Update(const std::vector<RankLiveState>& ranks, const std::vector<NodeView>& nodes,
              const LiveJobFacts& facts, int64_t now_unix_ms);
  // A new attempt: the ranks' clocks start afresh.
  void Reset();

  // The latest view; "" / a job in state "starting" before the first Update. Thread-safe; do not
  // block but for a copy under the mutex.
  std::string Json() const;
  std::string Metrics() const;
  bool Healthy() const;
  bool updated() const;

  // Pure: the snapshot of `ranks` with `facts`, given each rank's tracking so far (updated).
  struct Track {
    int64_t step = -1;
    int64_t step_since_ms = 0;
    int64_t started_seq = -1;
    int64_t started_since_ms = 0;
    int64_t beat_ms = 0;  // the heartbeat the comm share was last computed at
    int64_t steps_timed = -1;
    double busy_ms = 0;
    double comm_share = -1;
  };
  static LiveSnapshot Build(const std::vector<RankLiveState>& ranks,
                            const std::vector<NodeView>& nodes, const LiveJobFacts& facts,
                            int64_t now_unix_ms, std::map<int, Track>* tracks);

 private:
  std::map<int, Track> tracks_;  // the supervisor's thread only
  mutable std::mutex mu_;
  std::string json_;
  std::string metrics_;
  bool healthy_ = true;
  bool updated_ = false;
};

}  // namespace dlaunch::launcher
