// The analysis of a job's NCCL logs: verdicts that name ranks, hosts and the fix, a topology
// summary per node, and which transport each rank pair used. Plain data, rendered as text or
// JSON ("schema": "dlaunch.nccl/1").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/nccl_log/records.h"

namespace dlaunch::launcher::nccl_log {

struct Verdict {
  // nccl_version_mismatch, socket_fallback, bad_interface, p2p_disabled, p2p_unavailable,
  // shm_disabled, gdr_disabled, init_incomplete
  std::string kind;
  std::string severity;  // "error" or "warning"
  std::vector<int> ranks;
  std::vector<std::string> hosts;
  std::string message;  // one line naming the ranks and hosts
  std::string fix;
  std::vector<std::string> evidence;  // the log lines behind it, "rank 4: ..."
};

struct GpuTopology {
  int rank = -1;
  int cuda_dev = -1;
  std::string bus_id;
  std::vector<NicDistance> nics;  // NIC names resolved where the node's NIC list allows
};

struct NodeTopology {
  std::string host;
  std::vector<int> ranks;
  std::vector<GpuTopology> gpus;
  std::string network;             // IB, Socket, a plugin
  std::vector<NetInterface> nics;  // IB devices, else socket interfaces
  std::vector<NetInterface> bootstrap;
  int gdr = -1;  // 1 on, 0 off, -1 not logged
};

// Which transport NCCL chose for each directed rank pair of the world communicator:
// "P2P", "SHM", "IB", "IB/GDR", "SOCK", a plugin's name; "" where the ranks are not connected.
struct TransportMatrix {
  int size = 0;
  std::vector<std::vector<std::string>> cells;  // [src][dst]
};

struct NcclReport {
  ParseResult parsed;
  std::vector<Verdict> verdicts;
  std::vector<NodeTopology> nodes;
  TransportMatrix transports;
};

struct AnalyzeOptions {
  // The job is over, so a communicator without "Init COMPLETE" is stuck, not still starting.
  bool job_finished = true;
};

// Pure; does not block or throw.
NcclReport Analyze(ParseResult parsed, const AnalyzeOptions& options = {});

std::vector<Verdict> FindVerdicts(const ParseResult& parsed, const AnalyzeOptions& options);
std::vector<NodeTopology> SummarizeTopology(const ParseResult& parsed);
TransportMatrix BuildTransportMatrix(const ParseResult& parsed);

// "rank 3 (node-b)", or "node-b pid 4242 dev 0" for a rank NCCL never named.
std::string RankLabel(const RankLog& r);

// The text report: verdicts first (with fix and evidence), then nodes and the matrix.
std::string FormatReport(const NcclReport& report);
// The verdicts alone, two or three lines each, for the diagnosis.
std::vector<std::string> FormatVerdicts(const std::vector<Verdict>& verdicts);
std::string FormatTopology(const std::vector<NodeTopology>& nodes);
// The matrix as a table with a title line; empty when there is no link to show.
std::string FormatTransportMatrix(const TransportMatrix& matrix);

// For preflight's report: the transport matrix and the verdicts; empty without NCCL logs.
std::string FormatPreflightSection(const NcclReport& report);

nlohmann::json VerdictToJson(const Verdict& v);
nlohmann::json ReportToJson(const NcclReport& report);

}  // namespace dlaunch::launcher::nccl_log
