#include "worker/preflight/preflight_report.h"

#include <sstream>

#include "core/base/clock.h"

namespace dlaunch::worker {
namespace {

using nlohmann::json;

// "rank 3 (node 1, host-b)": where a rank lives, for the reasons.
std::string Where(const SuiteResults& r, int rank) {
  std::string out = "rank " + std::to_string(rank);
  std::string host =
      rank < static_cast<int>(r.devices.size()) ? r.devices[rank].host : std::string();
  if (r.ranks_per_node > 0 && r.world_size > r.ranks_per_node) {
    out += " (node " + std::to_string(rank / r.ranks_per_node) + (host.empty() ? "" : ", " + host) +
           ")";
  } else if (!host.empty()) {
    out += " (" + host + ")";
  }
  return out;
}

std::string Ratio(double value, double reference) {
  return reference > 0 ? Gbps(value / reference) : "0";
}

json PlaceJson(const PlaceResult& p) {
  return {{"time_us", p.time_us},
          {"algbw_gbps", p.algbw},
          {"busbw_gbps", p.busbw},
          {"wrong", p.checked ? json(p.wrong) : json(nullptr)}};
}

json SweepJson(const SweepResult& s) {
  json rows = json::array();
  for (const SweepRow& r : s.rows) {
    // The out-of-place figures stay at the top level of a row, where earlier readers look.
    json row = {{"size", r.bytes},
                {"count", r.count},
                {"type", r.dtype},
                {"redop", r.redop},
                {"root", r.root}};
    row.update(PlaceJson(r.out_of_place));
    row["in_place"] = PlaceJson(r.in_place);
    rows.push_back(row);
  }
  json j = {{"op", s.op->name},
            {"nccl_tests_name", s.op->perf_name},
            {"rows", rows},
            {"out_of_bounds", s.out_of_bounds},
            {"avg_busbw_gbps", s.avg_busbw}};
  if (!s.skipped.empty()) j["skipped"] = s.skipped;
  return j;
}

json P2PJson(const P2PResult& p) {
  json links = json::array();
  for (const SlowLink& l : p.slow_links) {
    links.push_back(
        {{"src", l.src}, {"dst", l.dst}, {"gbps", l.gbps}, {"repeats_gbps", l.repeats}});
  }
  json recovered = json::array();
  for (const RecoveredLink& l : p.recovered_links) {
    recovered.push_back({{"src", l.src},
                         {"dst", l.dst},
                         {"first_gbps", l.first_gbps},
                         {"repeats_gbps", l.repeats}});
  }
  json j = {{"bytes", p.bytes},
            {"iters", p.iters},
            {"retries", p.retries},
            {"matrix_gbps", p.gbps},
            {"median_gbps", p.median_gbps},
            {"slow_link_factor", p.slow_factor},
            {"slow_links", links},
            {"recovered_links", recovered},
            {"slow_ranks", p.slow_ranks},
            {"wrong", p.wrong}};
  if (!p.skipped.empty()) j["skipped"] = p.skipped;
  return j;
}

json HangJson(const HangTestResult& h) {
  json ranks = json::array();
  for (const HangTestRank& r : h.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"skipped_collective", r.skipped},
                     {"detected", r.detected},
                     {"elapsed_ms", r.elapsed_ms},
                     {"missing_ranks", r.missing_ranks},
                     {"message", r.message}});
  }
  json j = {{"ran", h.ran},       {"hang_rank", h.hang_rank},
            {"seq", h.seq},       {"timeout_ms", h.timeout_ms},
            {"passed", h.passed}, {"problems", h.problems},
            {"ranks", ranks}};
  if (!h.skipped.empty()) j["skipped"] = h.skipped;
  return j;
}

std::vector<std::string> Names(const std::vector<core::DataType>& v) {
  std::vector<std::string> out;
  for (auto t : v) out.push_back(core::DataTypeName(t));
  return out;
}
std::vector<std::string> Names(const std::vector<core::ReduceOp>& v) {
  std::vector<std::string> out;
  for (auto op : v) out.push_back(core::ReduceOpName(op));
  return out;
}

}  // namespace

std::vector<std::string> JudgeSuite(const SuiteResults& res, const PreflightOptions& o) {
  std::vector<std::string> reasons;
  for (const SweepResult& s : res.sweeps) {
    size_t largest = 0;
    for (const SweepRow& r : s.rows) largest = std::max(largest, r.bytes);
    for (const SweepRow& r : s.rows) {
      for (const auto& [place, p] :
           {std::pair<const char*, const PlaceResult*>{"out-of-place", &r.out_of_place},
            {"in-place", &r.in_place}}) {
        if (p->wrong > 0) {
          reasons.push_back(std::string(s.op->name) + " " + place + " (" + r.dtype + ", " +
                            r.redop + ", root " + std::to_string(r.root) +
                            "): " + std::to_string(p->wrong) + " wrong elements at " +
                            std::to_string(r.bytes) + " B");
        }
      }
      if (o.min_busbw > 0 && r.bytes == largest && r.out_of_place.busbw < o.min_busbw) {
        reasons.push_back(std::string(s.op->name) + ": busbw " + Gbps(r.out_of_place.busbw) +
                          " GB/s at " + std::to_string(r.bytes) + " B (" + r.dtype + ") is " +
                          Ratio(r.out_of_place.busbw, o.min_busbw) + " x --min-busbw " +
                          Gbps(o.min_busbw) + " GB/s");
      }
    }
  }
  if (res.p2p && res.p2p->skipped.empty()) {
    const P2PResult& p = *res.p2p;
    for (const SlowLink& l : p.slow_links) {
      reasons.push_back("p2p link " + Where(res, l.src) + " -> " + Where(res, l.dst) + ": " +
                        Gbps(l.gbps) + " GB/s, " + Ratio(l.gbps, p.median_gbps) + " x the median " +
                        Gbps(p.median_gbps) + " GB/s (threshold " + Gbps(p.slow_factor) +
                        " x); re-measured " + JoinGbps(l.repeats) + " GB/s");
    }
    for (int k : p.slow_ranks) {
      reasons.push_back(Where(res, k) + ": every link to and from it is slow");
    }
    if (p.wrong > 0) {
      reasons.push_back("p2p: " + std::to_string(p.wrong) + " corrupted elements");
    }
  }
  for (int k : res.nodes.slow_nodes) {
    std::string host = k * res.nodes.ranks_per_node < static_cast<int>(res.devices.size())
                           ? res.devices[k * res.nodes.ranks_per_node].host
                           : "";
    reasons.push_back("node " + std::to_string(k) + (host.empty() ? "" : " (" + host + ")") +
                      ": every link to and from another node is slow (median inter-node " +
                      Gbps(res.nodes.median_gbps) + " GB/s)");
  }
  for (const std::string& p : res.hang.problems) reasons.push_back("hang test: " + p);
  return reasons;
}

json SuiteJson(const SuiteResults& res, const PreflightOptions& o,
               const std::vector<std::string>& reasons, double duration_s) {
  json opts = {{"backend", res.backend},
               {"minbytes", o.min_bytes},
               {"maxbytes", o.max_bytes},
               {"stepfactor", o.step_factor},
               {"stepbytes", o.step_bytes},
               {"warmup_iters", o.warmup_iters},
               {"iters", o.iters},
               {"check", o.check_iters},
               {"blocking", o.blocking},
               {"cudagraph", o.graph_launches},
               {"local_register", static_cast<int>(o.registration)},
               {"average", o.average},
               {"ops", o.ops},
               {"datatype", Names(o.dtypes)},
               {"op", Names(o.redops)},
               {"root", o.root < 0 ? json("all") : json(o.root)},
               {"collective_timeout_ms", o.collective_timeout.count()},
               {"slow_link_factor", o.slow_link_factor},
               {"p2p_retries", o.p2p_retries},
               {"min_busbw", o.min_busbw},
               {"hang_test", o.hang_test},
               {"p2p", o.p2p},
               {"p2p_bytes", o.p2p_bytes}};
  json bandwidth = json::array();
  for (const SweepResult& s : res.sweeps) bandwidth.push_back(SweepJson(s));
  json devices = json::array();
  for (const DeviceInfo& d : res.devices) {
    devices.push_back({{"rank", d.rank},
                       {"pid", d.pid},
                       {"hostname", d.host},
                       {"device", d.device},
                       {"device_info", d.name}});
  }
  const NodeMatrix& nodes = res.nodes;
  return {{"verdict", reasons.empty() ? "PASS" : "FAIL"},
          {"reasons", reasons},
          {"world_size", res.world_size},
          {"backend", res.backend},
          {"unix_ms", base::UnixMillis()},
          {"duration_s", duration_s},
          {"options", opts},
          {"devices", devices},
          {"bandwidth", bandwidth},
          {"p2p", res.p2p ? P2PJson(*res.p2p) : json(nullptr)},
          {"node_matrix", nodes.gbps.empty() ? json(nullptr)
                                             : json{{"ranks_per_node", nodes.ranks_per_node},
                                                    {"matrix_gbps", nodes.gbps},
                                                    {"median_gbps", nodes.median_gbps},
                                                    {"slow_nodes", nodes.slow_nodes}}},
          {"hang_test", HangJson(res.hang)}};
}

std::string FormatVerdict(const SuiteResults& res, const std::vector<std::string>& reasons) {
  std::ostringstream out;
  const HangTestResult& hang = res.hang;
  if (hang.ran) {
    out << "# hang test: rank " << hang.hang_rank << " skipped allreduce seq " << hang.seq
        << "; timeout " << hang.timeout_ms << " ms\n";
    for (const HangTestRank& r : hang.ranks) {
      if (!r.skipped) out << "# hang test: rank " << r.rank << ": " << r.message << "\n";
    }
  }
  out << "# hang test: "
      << (hang.ran ? (hang.passed ? "passed" : "FAILED") : "skipped, " + hang.skipped) << "\n";
  out << "# verdict: " << (reasons.empty() ? "PASS" : "FAIL") << "\n";
  for (const std::string& r : reasons) out << "#   " << r << "\n";
  return out.str();
}

}  // namespace dlaunch::worker
