// preflight.json files recorded on GPU machines by scripts/gpu-check.sh (fixtures/gpu/*.json): a
// passing run, every measurement's algbw and busbw as nccl-tests' GetBw makes them from the row's
// count, element size and time, and #wrong 0 wherever a column was checked. Skipped until a GPU
// run has been imported.
#include "tests/preflight/recorded_gpu.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "worker/preflight/op_table.h"

namespace dlaunch::worker {
namespace {

using testing::RecordedGpuFiles;

size_t ElementSize(const std::string& type) {
  static const std::map<std::string, size_t> kSizes = {{"int8", 1},     {"uint8", 1}, {"half", 2},
                                                       {"bfloat16", 2}, {"float", 4}, {"int32", 4},
                                                       {"double", 8},   {"int64", 8}};
  auto it = kSizes.find(type);
  return it == kSizes.end() ? 0 : it->second;
}

TEST(RecordedGpuRunTest, BandwidthFollowsNcclTestsFormulas) {
  const auto files = RecordedGpuFiles(".json");
  if (files.empty()) GTEST_SKIP() << "no GPU recordings (scripts/gpu-check.sh import)";
  for (const auto& path : files) {
    std::ifstream in(path);
    const nlohmann::json doc = nlohmann::json::parse(in);
    const int n = doc.at("world_size").get<int>();
    EXPECT_EQ("PASS", doc.at("verdict")) << path << ": " << doc.value("reasons", nlohmann::json{});
    int measured = 0;
    for (const auto& op : doc.at("bandwidth")) {
      if (op.contains("skipped")) continue;
      const OpSpec* spec = FindOp(op.at("op").get<std::string>());
      ASSERT_NE(nullptr, spec) << path << ": unknown op " << op.at("op");
      EXPECT_EQ(0, op.at("out_of_bounds")) << path << " " << spec->name;
      for (const auto& row : op.at("rows")) {
        const size_t elt = ElementSize(row.at("type").get<std::string>());
        ASSERT_NE(0u, elt) << path << ": unknown type " << row.at("type");
        for (const nlohmann::json* cell : {&row, &row.at("in_place")}) {
          const double seconds = cell->at("time_us").get<double>() * 1e-6;
          const double algbw = OpAlgBw(*spec, row.at("count").get<size_t>(), elt, seconds, n);
          const double busbw = OpBusBw(*spec, algbw, n);
          // preflight.json keeps full precision; 1% absorbs the table's rounding of time.
          EXPECT_NEAR(algbw, cell->at("algbw_gbps").get<double>(), std::max(0.01 * algbw, 0.01))
              << path << " " << spec->name << " " << row.at("size");
          EXPECT_NEAR(busbw, cell->at("busbw_gbps").get<double>(), std::max(0.01 * busbw, 0.01))
              << path << " " << spec->name << " " << row.at("size");
          const auto& wrong = cell->at("wrong");
          if (!wrong.is_null()) {
            EXPECT_EQ(0, wrong.get<int64_t>()) << path << " " << spec->name;
          }
          ++measured;
        }
      }
    }
    EXPECT_GT(measured, 0) << path << " holds no measurement";
  }
}

}  // namespace
}  // namespace dlaunch::worker
