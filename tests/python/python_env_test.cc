// The environment a Python rank gets: where PyTorch's flight-recorder dumps go (both names torch
// reads), unless the user chose a place, and the ring's size under both its names. Pure.
#include <gtest/gtest.h>

#include "launcher/python/python_launch.h"

namespace dlaunch::launcher::python {
namespace {

TEST(PythonEnvTest, TorchDumpsGoIntoTheRankDirectoryUnderBothNames) {
  std::map<std::string, std::string> env;
  AddRankEnv("/logs/run/rank3", {}, &env);
  EXPECT_EQ(env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"], "/logs/run/rank3/torch_trace_");
  EXPECT_EQ(env["TORCH_FR_DUMP_TEMP_FILE"], "/logs/run/rank3/torch_trace_");
}

TEST(PythonEnvTest, TheUsersDumpPlaceStaysUnderEitherName) {
  for (const char* key : {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_FR_DUMP_TEMP_FILE"}) {
    std::map<std::string, std::string> env;
    AddRankEnv("/logs/run/rank0", {{key, "/scratch/fr_"}}, &env);
    EXPECT_EQ(env.count("TORCH_NCCL_DEBUG_INFO_TEMP_FILE"), 0u) << key;
    EXPECT_EQ(env.count("TORCH_FR_DUMP_TEMP_FILE"), 0u) << key;
  }
}

TEST(PythonEnvTest, TheRingSizeIsSetUnderBothNamesAndTheOldOneMarkedAsDlaunchs) {
  std::map<std::string, std::string> env;
  AddJobEnv("/opt/agent", true, {}, &env);
  EXPECT_EQ(env["TORCH_FR_BUFFER_SIZE"], "2000");
  EXPECT_EQ(env["TORCH_NCCL_TRACE_BUFFER_SIZE"], "2000");
  EXPECT_EQ(env["DLAUNCH_TORCH_ENV_DEFAULTS"], "TORCH_NCCL_TRACE_BUFFER_SIZE");
}

TEST(PythonEnvTest, TheUsersRingSizeUnderEitherNameLeavesBothAlone) {
  for (const char* key : {"TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE"}) {
    std::map<std::string, std::string> env;
    AddJobEnv("/opt/agent", true, {{key, "50"}}, &env);
    EXPECT_EQ(env.count("TORCH_NCCL_TRACE_BUFFER_SIZE"), 0u) << key;
    EXPECT_EQ(env.count("TORCH_FR_BUFFER_SIZE"), 0u) << key;
    EXPECT_EQ(env.count("DLAUNCH_TORCH_ENV_DEFAULTS"), 0u) << key;
  }
}

}  // namespace
}  // namespace dlaunch::launcher::python
