// The sweep tables in nccl-tests' layout (src/util.cu: writeDeviceReport, writeResultHeader,
// writeBenchmarkLine*, writeResultFooter), so that tools written for nccl-tests read them: one
// op's section is, line for line, what its *_perf program prints. Also the same rows as CSV.
#pragma once

#include <string>
#include <vector>

#include "worker/preflight/bandwidth_sweep.h"
#include "worker/preflight/preflight_options.h"

namespace dlaunch::worker {

// One rank of the "# Using devices" block.
struct DeviceInfo {
  int rank = 0;
  int pid = 0;
  std::string host;
  int device = 0;    // the local rank's device (NCCL) or the local rank (gloo)
  std::string name;  // "CPU (gloo)", "CUDA device (nccl)"
};

// "#  Rank  0 Group  0 Pid   1234 on   hostname device  0 [0000:00:00] CPU (gloo)"
std::string FormatDeviceLine(const DeviceInfo& d);
// Parses a line of FormatDeviceLine back; false when it is not one.
bool ParseDeviceLine(const std::string& line, DeviceInfo* out);

// One op's whole section: "# Collective test starting", the parameters line, the device block,
// the two-group header, the rows, "# Out of bounds values", "# Avg bus bandwidth" and
// "# Collective test concluded". A skipped op gets one comment line instead.
std::string FormatSweepTable(const SweepResult& result, const PreflightOptions& options,
                             const std::vector<DeviceInfo>& devices);

// nccl-tests' number cells: the widest of %.2f, %.1f, %.0f that fits the width, else %e.
std::string FloatCell(double value, int width);

// Header line and rows of every sweep as CSV (one row per op and size; wrong empty for N/A).
std::string CsvHeader();
std::string FormatSweepCsv(const SweepResult& result);

}  // namespace dlaunch::worker
