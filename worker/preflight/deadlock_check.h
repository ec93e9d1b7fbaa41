// The deadlock-timeout check: one rank deliberately skips a collective; every other rank must
// report "rank k missing from seq s" within the collective timeout plus one second. Proof that a
// real hang would be loud, not silent.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/comm_options.h"
#include "core/store.h"

namespace dlaunch::worker {

struct HangTestRank {
  int rank = 0;
  bool skipped = false;  // the designated rank
  bool detected = false;
  int64_t elapsed_ms = 0;
  std::vector<int> missing_ranks;
  std::string message;
};

struct HangTestResult {
  bool ran = false;
  std::string skipped;  // why it did not run
  int hang_rank = -1;
  int64_t seq = -1;
  int64_t timeout_ms = 0;
  std::vector<HangTestRank> ranks;  // filled on rank 0
  bool passed = false;
  std::vector<std::string> problems;
};

struct HangTestParams {
  int rank = 0;
  int world_size = 1;
  int hang_rank = 0;
  std::chrono::milliseconds timeout{10000};
  // Store for this test only (already prefixed); results and sync keys go here too.
  std::shared_ptr<core::Store> store;
  // Builds the communicator under test with the given options filled in by the test.
  std::function<std::unique_ptr<core::Communicator>(core::CommOptions)> make_comm;
  core::CommOptions base_options;  // backend, iface, ... (store, timeout, on_timeout set here)
};

// Collective over every rank. Blocks for about the timeout plus a few round trips; waits on
// peers are bounded by the timeout plus 10 s. Rank 0's result holds every rank's outcome; the
// others' hold their own only. Throws Error when the communicator cannot be built.
HangTestResult RunHangTest(const HangTestParams& params);

}  // namespace dlaunch::worker
