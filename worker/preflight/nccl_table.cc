#include "worker/preflight/nccl_table.h"

#include <cstdio>
#include <sstream>

namespace dlaunch::worker {
namespace {

// The widths of nccl-tests' preamble and column groups.
void AppendPlace(std::string& out, const PlaceResult& p) {
  char line[96];
  const std::string t = FloatCell(p.time_us, 7), a = FloatCell(p.algbw, 6),
                    b = FloatCell(p.busbw, 6);
  if (p.checked) {
    std::snprintf(line, sizeof(line), "  %7s  %6s  %6s  %6g", t.c_str(), a.c_str(), b.c_str(),
                  static_cast<double>(p.wrong));
  } else {
    std::snprintf(line, sizeof(line), "  %7s  %6s  %6s    N/A", t.c_str(), a.c_str(), b.c_str());
  }
  out += line;
}

std::string Header() {
  char line[512];
  std::string out = "#\n";
  std::snprintf(line, sizeof(line),
                "# %10s  %12s  %8s  %6s  %6s           out-of-place                       "
                "in-place          \n",
                "", "", "", "", "");
  out += line;
  std::snprintf(line, sizeof(line),
                "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                "algbw", "busbw", "#wrong", 0, "");
  out += line;
  std::snprintf(line, sizeof(line),
                "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                "(GB/s)", "", 0, "");
  out += line;
  return out;
}

}  // namespace

std::string FloatCell(double value, int width) {
  char s[64];
  for (const char* fmt : {"%*.2f", "%*.1f", "%*.0f"}) {
    if (std::snprintf(s, sizeof(s), fmt, width, value) <= width) return s;
  }
  std::snprintf(s, sizeof(s), width >= 7 ? "%*.1e" : "%*.0e", width, value);
  return s;
}

std::string FormatDeviceLine(const DeviceInfo& d) {
  char line[512];
  std::snprintf(line, sizeof(line),
                "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s", d.rank, 0,
                d.pid, d.host.c_str(), d.device, 0, 0, 0, d.name.c_str());
  return line;
}

bool ParseDeviceLine(const std::string& line, DeviceInfo* out) {
  char host[256] = {0};
  int rank = 0, group = 0, pid = 0, device = 0, consumed = 0;
  unsigned a = 0, b = 0, c = 0;
  if (std::sscanf(line.c_str(), "#  Rank %d Group %d Pid %d on %255s device %d [%x:%x:%x] %n",
                  &rank, &group, &pid, host, &device, &a, &b, &c, &consumed) < 8 ||
      consumed == 0) {
    return false;
  }
  *out = DeviceInfo{rank, pid, host, device, line.substr(consumed)};
  return true;
}

std::string FormatSweepTable(const SweepResult& result, const PreflightOptions& o,
                             const std::vector<DeviceInfo>& devices) {
  const char* program = result.op->perf_name;
  if (!result.skipped.empty()) {
    return std::string("# ") + program + " skipped: " + result.skipped + "\n\n";
  }
  std::string out;
  char line[512];
  out += std::string("# Collective test starting: ") + program + "\n";
  const bool factor = o.step_bytes == 0;
  std::snprintf(line, sizeof(line),
                "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
                "iters: %d agg iters: 1 validation: %d graph: %d unalign: 0\n",
                o.min_bytes, o.max_bytes, factor ? o.step_factor : o.step_bytes,
                factor ? "factor" : "bytes", o.warmup_iters, o.iters, o.check_iters,
                o.graph_launches);
  out += line;
  if (o.blocking == 1)
    out += "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n";
  if (o.blocking == 2)
    out += "# Blocking Enabled: wait after each inner iteration (-m), no barrier \n";
  if (o.blocking == 3) {
    out +=
        "# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes "
        "barrier \n";
  }
  out += "#\n# Using devices\n";
  for (const DeviceInfo& d : devices) out += FormatDeviceLine(d) + "\n";
  out += Header();
  for (const SweepRow& r : result.rows) {
    std::snprintf(line, sizeof(line), "%12zu  %12zu  %8s  %6s  %6i", r.bytes, r.count,
                  r.dtype.c_str(), r.redop.c_str(), r.root);
    out += line;
    AppendPlace(out, r.out_of_place);
    AppendPlace(out, r.in_place);
    out += "\n";
  }
  std::snprintf(line, sizeof(line), "# %-20s : %d %s\n", "Out of bounds values",
                result.out_of_bounds, result.out_of_bounds ? "FAILED" : "OK");
  out += line;
  std::snprintf(line, sizeof(line), "# %-20s : %g %s\n", "Avg bus bandwidth", result.avg_busbw, "");
  out += line;
  out += std::string("#\n# Collective test concluded: ") + program + "\n\n";
  return out;
}

std::string CsvHeader() {
  return "op,size,count,type,redop,root,time_us,algbw_gbps,busbw_gbps,wrong,in_place_time_us,"
         "in_place_algbw_gbps,in_place_busbw_gbps,in_place_wrong\n";
}

std::string FormatSweepCsv(const SweepResult& result) {
  std::ostringstream out;
  out.precision(6);
  auto place = [&](const PlaceResult& p) {
    out << "," << p.time_us << "," << p.algbw << "," << p.busbw << ",";
    if (p.checked) out << p.wrong;
  };
  for (const SweepRow& r : result.rows) {
    out << result.op->name << "," << r.bytes << "," << r.count << "," << r.dtype << "," << r.redop
        << "," << r.root;
    place(r.out_of_place);
    place(r.in_place);
    out << "\n";
  }
  return out.str();
}

}  // namespace dlaunch::worker
