// The job token a Slurm step derives from the user's secret: one per step, the same on every
// task, and refused when the secret is not private.
#include "launcher/job/slurm_token.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tests/common/test_dir.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

class SlurmTokenTest : public ::testing::Test {
 protected:
  void SetUp() override { secret_ = (home_ / ".dlaunch" / "job-secret").string(); }
  static std::map<std::string, std::string> Step(const std::string& job, const std::string& step) {
    return {{"SLURM_JOB_ID", job}, {"SLURM_STEP_ID", step}, {"SLURM_PROCID", "1"}};
  }
  std::string Refusal() {
    try {
      SlurmStepToken(Step("7", "0"), secret_);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  }
  const dlaunch::testing::TestDir test_dir_{"token"};
  const fs::path home_ = test_dir_.path();
  std::string secret_;
};

TEST_F(SlurmTokenTest, EveryTaskOfAStepDerivesOneTokenAndOtherStepsAnother) {
  const std::string token = SlurmStepToken(Step("7", "0"), secret_);
  EXPECT_EQ(token.size(), 64u);
  auto other_task = Step("7", "0");
  other_task["SLURM_PROCID"] = "0";
  EXPECT_EQ(SlurmStepToken(other_task, secret_), token);
  EXPECT_NE(SlurmStepToken(Step("7", "1"), secret_), token);
  EXPECT_NE(SlurmStepToken(Step("8", "0"), secret_), token);
  auto requeued = Step("7", "0");
  requeued["SLURM_RESTART_COUNT"] = "1";
  EXPECT_NE(SlurmStepToken(requeued, secret_), token);
  // Not the secret itself: a rank's environment holds the token only.
  std::ifstream in(secret_);
  std::string secret;
  in >> secret;
  EXPECT_EQ(secret.size(), 64u);
  EXPECT_EQ(token.find(secret), std::string::npos);
}

TEST_F(SlurmTokenTest, TheSecretIsCreatedPrivateOnce) {
  SlurmStepToken(Step("7", "0"), secret_);
  struct stat st {};
  ASSERT_EQ(::stat(secret_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(fs::path(secret_).parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // No temporary file left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(fs::path(secret_).parent_path()),
                          fs::directory_iterator()),
            1);
  // A secret another node made first stands.
  const std::string token = SlurmStepToken(Step("7", "0"), secret_);
  EXPECT_EQ(SlurmStepToken(Step("7", "0"), secret_), token);
}

TEST_F(SlurmTokenTest, ASecretOthersCanReadIsRefusedNamingWhatToExport) {
  SlurmStepToken(Step("7", "0"), secret_);
  ::chmod(secret_.c_str(), 0644);
  const std::string why = Refusal();
  EXPECT_NE(why.find("others may read or change it"), std::string::npos) << why;
  EXPECT_NE(why.find("export DLAUNCH_JOB_TOKEN="), std::string::npos) << why;
}

TEST_F(SlurmTokenTest, ASymlinkOrAFolderOthersCanWriteIsRefused) {
  fs::create_directories(home_ / ".dlaunch");
  std::ofstream(home_ / "elsewhere") << std::string(64, 'a') << "\n";
  ::chmod((home_ / "elsewhere").c_str(), 0600);
  fs::create_symlink(home_ / "elsewhere", secret_);
  EXPECT_NE(Refusal().find("symbolic link"), std::string::npos) << Refusal();
  fs::remove(secret_);
  ::chmod((home_ / ".dlaunch").c_str(), 0777);
  EXPECT_NE(Refusal().find("writable by others"), std::string::npos) << Refusal();
}

TEST_F(SlurmTokenTest, OutsideAStepOrWithoutHomeItIsRefused) {
  EXPECT_THROW(SlurmStepToken({{"SLURM_JOB_ID", "7"}}, secret_), UsageError);
  EXPECT_THROW(SlurmStepToken(Step("7", "0"), ""), UsageError);
}

}  // namespace
}  // namespace dlaunch::launcher
