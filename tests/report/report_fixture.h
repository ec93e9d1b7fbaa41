// A run directory of four ranks written with core/run_dir's own writers, with figures the report
// tests then look for on the page: a memory climb to kPeakRssMib on rank 3, rank 1 slow, an OOM on
// rank 2, a pre-flight sweep from 1 KiB to 1 MiB with the link 1 -> 2 flagged slow, and a rank
// whose stderr says `<script>`.
#pragma once

#include <string>

namespace dlaunch::testing {

inline constexpr int kFixtureRanks = 4;
inline constexpr int kFixtureSteps = 300;
inline constexpr double kPeakRssMib = 1000;  // rank 3's last sample
inline constexpr double kStepMs = 100;       // every rank but 1
inline constexpr double kSlowStepMs = 150;   // rank 1
inline constexpr double kMinSizeBytes = 1024;
inline constexpr double kMaxSizeBytes = 1 << 20;
inline constexpr double kMaxBusbwGbps = 12;
inline constexpr char kHostileLine[] = "<script>document.title='pwned'</script> & \"quoted\"";

// Writes the fixture into `dir` (created). Blocks for the writes.
void WriteFixtureRun(const std::string& dir);

}  // namespace dlaunch::testing
