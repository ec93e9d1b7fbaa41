// Launchers of one job on loopback, each with its own --log-dir and the same endpoint and run id:
// the fixture of the multi-node process tests (elastic_test.cc, tests/cluster).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "launcher/rendezvous/ports.h"
#include "process_harness.h"
#include "tests/common/test_dir.h"

namespace dlaunch::testing {

namespace fs = std::filesystem;
using std::chrono::seconds;

inline constexpr char kToken[] = "DLAUNCH_JOB_TOKEN=elastic-test-token-0123456789";

class ElasticJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoint_ = "127.0.0.1:" + std::to_string(launcher::PickFreePort("0.0.0.0"));
  }

  // A launcher with its own --log-dir `name`, the same endpoint and run id as the others, and no
  // --node-rank unless `extra` gives one.
  std::unique_ptr<Launched> Start(const std::string& name, const std::string& nnodes,
                                  const std::string& script, std::vector<std::string> extra = {}) {
    return StartProgram(name, nnodes, {"/bin/sh", "-c", script}, std::move(extra));
  }
  // The same with any program.
  std::unique_ptr<Launched> StartProgram(const std::string& name, const std::string& nnodes,
                                         const std::vector<std::string>& program,
                                         const std::vector<std::string>& extra,
                                         std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {DLAUNCH_BIN,  "--nnodes",       nnodes, "--rdzv-endpoint",
                                     endpoint_,    "--nproc",        nproc_, "--log-dir",
                                     LogDir(name), "--run-id",       "job",  "--heartbeat-timeout",
                                     "3",          "--rdzv-timeout", "20"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), program.begin(), program.end());
    argv.insert(argv.begin(), prefix_.begin(), prefix_.end());
    env.push_back(kToken);
    return std::make_unique<Launched>(argv, env);
  }
  std::string LogDir(const std::string& name) { return (dir_ / name).string(); }
  fs::path RunDir(const std::string& name) { return fs::path(LogDir(name)) / "job"; }
  // The run directory of the launcher that hosted the coordinator (it has summary.json).
  fs::path NodeZeroRunDir(const std::vector<std::string>& names) {
    for (const auto& n : names)
      if (fs::exists(RunDir(n) / "summary.json")) return RunDir(n);
    return {};
  }
  static nlohmann::json Json(const fs::path& p) {
    std::ifstream in(p);
    return nlohmann::json::parse(in, nullptr, false);
  }
  static std::vector<std::string> Lines(const fs::path& p) {
    std::ifstream in(p);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }
  static bool Has(const std::string& text, const std::string& what) {
    return text.find(what) != std::string::npos;
  }
  static std::function<bool(const std::vector<std::string>&)> Count(const std::string& what,
                                                                    int n) {
    return [what, n](const std::vector<std::string>& lines) {
      return std::count_if(lines.begin(), lines.end(),
                           [&](const std::string& l) { return Has(l, what); }) >= n;
    };
  }

  std::string nproc_ = "2";          // ranks per launcher
  std::vector<std::string> prefix_;  // what runs the launcher (ip netns exec ...), if anything
  const TestDir test_dir_{"el"};
  const fs::path dir_ = test_dir_.path();
  std::string endpoint_;
};

}  // namespace dlaunch::testing
