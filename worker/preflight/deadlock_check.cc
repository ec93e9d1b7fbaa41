#include "worker/preflight/deadlock_check.h"

#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/comm/communicator.h"
#include "core/error.h"

namespace dlaunch::worker {
namespace {

using std::chrono::milliseconds;

std::string ResultKey(int rank) { return "result/" + std::to_string(rank); }
std::string ReportedKey(int rank) { return "reported/" + std::to_string(rank); }

}  // namespace

HangTestResult RunHangTest(const HangTestParams& p) {
  HangTestResult result;
  result.hang_rank = p.hang_rank;
  result.timeout_ms = p.timeout.count();
  result.seq = 1;  // seq 0 proves the communicator works; seq 1 is the one skipped
  if (p.world_size < 2) {
    result.skipped = "needs at least 2 ranks";
    result.passed = true;
    return result;
  }
  result.ran = true;

  std::mutex mu;
  std::optional<core::TimeoutReport> report;
  core::CommOptions o = p.base_options;
  o.rank = p.rank;
  o.size = p.world_size;
  o.store = core::MakePrefixStore("comm/", p.store);
  o.timeout = p.timeout;
  o.exit_on_timeout = false;  // this hang is deliberate
  o.on_timeout = [&](const core::TimeoutReport& r) {
    std::lock_guard<std::mutex> lock(mu);
    report = r;
  };

  std::vector<std::string> others_reported;
  for (int r = 0; r < p.world_size; ++r)
    if (r != p.hang_rank) others_reported.push_back(ReportedKey(r));
  const milliseconds peer_wait = p.timeout * 2 + std::chrono::seconds(10);

  HangTestRank mine;
  mine.rank = p.rank;
  mine.skipped = p.rank == p.hang_rank;
  {
    std::unique_ptr<core::Communicator> comm = p.make_comm(o);
    auto mem = comm->Allocate(sizeof(float));
    core::Buffer one = comm->MakeBuffer(mem.get(), 1, core::DataType::kFloat32);
    comm->AllReduce(one, core::ReduceOp::kSum)->Wait(p.timeout);  // seq 0: everyone is here

    if (mine.skipped) {
      // Stay out of seq 1 until every other rank has reported; then leave with them.
      p.store->Wait(others_reported, peer_wait);
    } else {
      auto start = std::chrono::steady_clock::now();
      auto work = comm->AllReduce(one, core::ReduceOp::kSum);
      try {
        work->Wait(p.timeout + std::chrono::seconds(5));
        mine.message = "allreduce seq 1 completed without rank " + std::to_string(p.hang_rank);
      } catch (const Error& e) {
        mine.elapsed_ms =
            std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start)
                .count();
        std::lock_guard<std::mutex> lock(mu);
        mine.detected = e.kind() == ErrorKind::kTimeout && report.has_value();
        mine.message = report ? report->message : e.what();
        if (report) mine.missing_ranks = report->missing_ranks;
      }
      std::cerr << "preflight hang test: rank " << p.rank << ": " << mine.message << " (after "
                << mine.elapsed_ms << " ms)" << std::endl;
      p.store->Set(ReportedKey(p.rank), "1");
      // A rank that tears down early turns the others' timeout into "peer gone": leave together.
      p.store->Wait(others_reported, peer_wait);
    }
  }

  nlohmann::json j = {{"rank", mine.rank},
                      {"skipped", mine.skipped},
                      {"detected", mine.detected},
                      {"elapsed_ms", mine.elapsed_ms},
                      {"missing_ranks", mine.missing_ranks},
                      {"message", mine.message}};
  p.store->Set(ResultKey(p.rank), j.dump());
  if (p.rank != 0) {
    result.ranks.push_back(mine);
    return result;
  }

  result.passed = true;
  const int64_t limit_ms = p.timeout.count() + 1000;
  for (int r = 0; r < p.world_size; ++r) {
    HangTestRank hr;
    try {
      auto jr = nlohmann::json::parse(p.store->Get(ResultKey(r), peer_wait));
      hr.rank = jr["rank"];
      hr.skipped = jr["skipped"];
      hr.detected = jr["detected"];
      hr.elapsed_ms = jr["elapsed_ms"];
      hr.missing_ranks = jr["missing_ranks"].get<std::vector<int>>();
      hr.message = jr["message"];
    } catch (const std::exception& e) {
      hr.rank = r;
      result.problems.push_back("rank " + std::to_string(r) +
                                " gave no hang-test result: " + e.what());
      result.passed = false;
      result.ranks.push_back(hr);
      continue;
    }
    if (!hr.skipped) {
      std::string who = "rank " + std::to_string(r);
      if (!hr.detected) {
        result.problems.push_back(who + " did not detect the skipped collective: " + hr.message);
      } else if (hr.elapsed_ms > limit_ms) {
        result.problems.push_back(who + " reported after " + std::to_string(hr.elapsed_ms) +
                                  " ms, later than the timeout + 1 s (" + std::to_string(limit_ms) +
                                  " ms)");
      } else if (hr.missing_ranks != std::vector<int>{p.hang_rank}) {
        result.problems.push_back(who + " named the wrong missing ranks: " + hr.message);
      }
    }
    result.ranks.push_back(hr);
  }
  result.passed = result.problems.empty();
  return result;
}

}  // namespace dlaunch::worker
