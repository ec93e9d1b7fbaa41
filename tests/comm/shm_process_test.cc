// The shared-memory transport with ranks as forked processes: a peer SIGKILLed or SIGSTOPped in
// the middle of a collective makes the others fail within the collective timeout, and nothing is
// left in /dev/shm afterwards - not even when every rank is SIGKILLed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <vector>

#include "core/comm/comm_options.h"
#include "core/error.h"
#include "tests/comm/file_store.h"
#include "tests/comm/rank_threads.h"

namespace dlaunch::core {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using testing::FileStore;

constexpr int kRanks = 4;
constexpr int kVictim = 2;
constexpr milliseconds kTimeout(3000);

int64_t MonotonicNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A rank: allreduces of 8 MiB (many slot-sized chunks each, so a signal lands inside one) until
// one fails; then records how and when under "result/<rank>" and exits 1. With `park`, 1 KiB
// allreduces (one meeting each), and the victim stops calling them after its warm-up: it says
// "parked" and pauses, so that the others end up asleep on its arrival flag.
[[noreturn]] void RankMain(int rank, const std::string& dir, bool park) {
  auto store = std::make_shared<FileStore>(dir);
  int code = 1;
  try {
    CommOptions o = testing::GlooOptions(rank, kRanks, store, kTimeout);
    o.transport = "shm";
    auto comm = MakeCommunicator(o);
    std::vector<float> buf(park ? 256 : 2 << 20, 1.0f);
    for (int i = 0;; ++i) {
      comm->AllReduce({buf.data(), buf.size()}, ReduceOp::kSum)->Wait(std::chrono::seconds(30));
      if (i == 3) store->Add("warm", 1);
      if (park && rank == kVictim && i == 3) {
        store->Set("parked", "1");
        while (true) pause();
      }
    }
  } catch (const Error& e) {
    store->Set("result/" + std::to_string(rank), std::to_string(static_cast<int>(e.kind())) + " " +
                                                     std::to_string(MonotonicNanos()) + " " +
                                                     e.what());
  } catch (const std::exception& e) {
    store->Set("result/" + std::to_string(rank), std::string("-1 0 ") + e.what());
    code = 2;
  }
  std::_Exit(code);
}

struct Outcome {
  int kind = -1;
  int64_t at_ns = 0;
  std::string message;
};

class ShmProcessTest : public ::testing::Test {
 protected:
  virtual bool Park() const { return false; }

  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dlaunch-shm-proc-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    store_ = std::make_shared<FileStore>(dir_.string());
    for (int r = 0; r < kRanks; ++r) {
      pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) RankMain(r, dir_.string(), Park());
      pids_.push_back(pid);
    }
    leader_pid_ = pids_[0];
    // Every rank is past its rendezvous and inside the allreduce loop.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!store_->Check("warm") || std::stoi(store_->Get("warm", milliseconds(0))) < kRanks) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "ranks never warmed up";
      std::this_thread::sleep_for(milliseconds(5));
    }
  }

  void TearDown() override {
    for (pid_t pid : pids_) {
      if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
    // The segment is named after the leader (rank 0): nothing of it may remain.
    const std::string prefix = "dlaunch-" + std::to_string(leader_pid_) + "-";
    for (const auto& entry : fs::directory_iterator("/dev/shm")) {
      EXPECT_NE(0u, entry.path().filename().string().rfind(prefix, 0))
          << "left behind: " << entry.path();
    }
    fs::remove_all(dir_);
  }

  // Waits for rank r's exit (at most `limit`); returns its recorded failure.
  Outcome Reap(int r, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (waitpid(pids_[r], &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "rank " << r << " still running";
        return {};
      }
      std::this_thread::sleep_for(milliseconds(5));
    }
    pids_[r] = -1;
    Outcome o;
    std::istringstream in(store_->Get("result/" + std::to_string(r), milliseconds(1000)));
    in >> o.kind >> o.at_ns;
    std::getline(in, o.message);
    return o;
  }

  fs::path dir_;
  std::shared_ptr<FileStore> store_;
  std::vector<pid_t> pids_;
  pid_t leader_pid_ = 0;
};

TEST_F(ShmProcessTest, KilledPeerFailsTheOthersAtOnce) {
  const int64_t killed_at = MonotonicNanos();
  ASSERT_EQ(0, kill(pids_[kVictim], SIGKILL));
  waitpid(pids_[kVictim], nullptr, 0);
  pids_[kVictim] = -1;
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    Outcome o = Reap(r, std::chrono::seconds(20));
    // Noticed through the dead rank's robust mutex, well before the collective timeout.
    EXPECT_LT(o.at_ns - killed_at, std::chrono::nanoseconds(kTimeout).count()) << o.message;
    EXPECT_NE(std::string::npos, o.message.find("rank 2")) << o.message;
    EXPECT_TRUE(o.kind == static_cast<int>(ErrorKind::kPeerGone) ||
                o.kind == static_cast<int>(ErrorKind::kTimeout))
        << o.kind << ": " << o.message;
  }
}

TEST_F(ShmProcessTest, StoppedPeerFailsTheOthersAtTheTimeout) {
  const int64_t stopped_at = MonotonicNanos();
  ASSERT_EQ(0, kill(pids_[kVictim], SIGSTOP));
  bool some_timeout = false;
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    Outcome o = Reap(r, std::chrono::seconds(20));
    // Alive but stopped: the others wait out the collective timeout, and not much longer.
    const int64_t waited = o.at_ns - stopped_at;
    EXPECT_LT(waited, std::chrono::nanoseconds(kTimeout + std::chrono::seconds(2)).count())
        << o.message;
    EXPECT_GT(waited, std::chrono::nanoseconds(kTimeout / 2).count()) << o.message;
    some_timeout |= o.kind == static_cast<int>(ErrorKind::kTimeout);
  }
  EXPECT_TRUE(some_timeout);
}

TEST_F(ShmProcessTest, NothingLeftInDevShmWhenEveryRankIsKilled) {
  for (pid_t& pid : pids_) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
  // TearDown checks /dev/shm.
}

class ShmParkedPeerTest : public ShmProcessTest {
 protected:
  bool Park() const override { return true; }
};

TEST_F(ShmParkedPeerTest, PeerKilledWhileTheOthersSleepOnItsFlagFailsThemAtOnce) {
  store_->Get("parked", milliseconds(10000));
  // Long enough for the others to pass their spin and yield phases and sleep on its flag.
  std::this_thread::sleep_for(milliseconds(200));
  const int64_t killed_at = MonotonicNanos();
  ASSERT_EQ(0, kill(pids_[kVictim], SIGKILL));
  waitpid(pids_[kVictim], nullptr, 0);
  pids_[kVictim] = -1;
  bool some_saw_the_death = false;
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    Outcome o = Reap(r, std::chrono::seconds(20));
    // The sleepers look at their peers' health every sleep slice, so they notice the death
    // through its robust mutex long before the collective timeout. (The watchdog may call it a
    // hang instead: the dead rank never started this op; and a rank whose communicator was
    // aborted by the first one's report says that.)
    some_saw_the_death |= o.message.find("rank 2 (pid") != std::string::npos &&
                          o.message.find("died") != std::string::npos;
    EXPECT_TRUE(o.kind == static_cast<int>(ErrorKind::kPeerGone) ||
                o.kind == static_cast<int>(ErrorKind::kTimeout))
        << o.kind << ": " << o.message;
    EXPECT_LT(o.at_ns - killed_at, std::chrono::nanoseconds(kTimeout / 2).count()) << o.message;
  }
  EXPECT_TRUE(some_saw_the_death);
}

}  // namespace
}  // namespace dlaunch::core
