// ShmGroup's send/recv with ranks as threads: rings smaller than the messages, both halves of a
// SendRecv progressing together, order, eager sends, size mismatches, timeouts and Abort().
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <vector>

#include "core/comm/shm_group.h"
#include "core/error.h"
#include "tests/comm/rank_threads.h"

namespace dlaunch::core {
namespace {

using Clock = std::chrono::steady_clock;
using testing::JoinShmGroup;
using testing::RunRanks;

Clock::time_point Soon() { return Clock::now() + std::chrono::seconds(30); }

std::vector<char> Pattern(int from, size_t bytes) {
  std::vector<char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<char>(from * 31 + i * 7 + (i >> 8));
  return v;
}

TEST(ShmP2PTest, RingOfSendRecvLargerThanTheRingsDeliversEveryByte) {
  constexpr int kRanks = 4;
  auto store = MakeMemoryStore();
  RunRanks(kRanks, [&](int r) {
    auto g = JoinShmGroup(r, kRanks, store);
    ASSERT_EQ(1024u, g->channel_bytes());
    const int right = (r + 1) % kRanks, left = (r + kRanks - 1) % kRanks;
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{7}, size_t{1015}, size_t{1016}, size_t{1024},
                         size_t{3 * 1024 + 5}, size_t{(1 << 20) + 3}}) {
      std::vector<char> send = Pattern(r, bytes), recv(bytes + 1, 'x');
      g->SendRecv(send.data(), bytes, right, recv.data(), bytes, left, Soon());
      EXPECT_EQ(0, std::memcmp(recv.data(), Pattern(left, bytes).data(), bytes))
          << "rank " << r << " bytes " << bytes;
      EXPECT_EQ('x', recv[bytes]) << "wrote past the buffer";
    }
  });
}

TEST(ShmP2PTest, TwoRanksExchangingBothWaysAtOnceDoNotDeadlock) {
  auto store = MakeMemoryStore();
  RunRanks(2, [&](int r) {
    auto g = JoinShmGroup(r, 2, store);
    // Far more than a ring each way: each side must drain the other while it sends.
    const size_t bytes = 8 << 20;
    std::vector<char> send = Pattern(r, bytes), recv(bytes);
    g->SendRecv(send.data(), bytes, 1 - r, recv.data(), bytes, 1 - r, Soon());
    EXPECT_EQ(recv, Pattern(1 - r, bytes));
  });
}

TEST(ShmP2PTest, SendsThatFitReturnBeforeTheReceiverStartsAndKeepTheirOrder) {
  auto store = MakeMemoryStore();
  std::promise<void> all_sent;
  RunRanks(2, [&](int r) {
    auto g = JoinShmGroup(r, 2, store);
    constexpr int kMessages = 20;  // 20 x (8 + 40) bytes fit a 1 KiB ring
    if (r == 0) {
      for (int m = 0; m < kMessages; ++m) {
        std::vector<char> msg = Pattern(m, 40);
        g->SendRecv(msg.data(), msg.size(), 1, nullptr, 0, -1, Soon());
      }
      all_sent.set_value();
      return;
    }
    all_sent.get_future().wait();
    for (int m = 0; m < kMessages; ++m) {
      std::vector<char> got(40);
      g->SendRecv(nullptr, 0, -1, got.data(), got.size(), 0, Soon());
      EXPECT_EQ(got, Pattern(m, 40)) << "message " << m;
    }
  });
}

TEST(ShmP2PTest, AReceiveOfTheWrongSizeIsRefusedBeforeItReadsThePayload) {
  auto store = MakeMemoryStore();
  RunRanks(2, [&](int r) {
    auto g = JoinShmGroup(r, 2, store);
    if (r == 0) {
      std::vector<char> msg(100, 'a');
      g->SendRecv(msg.data(), msg.size(), 1, nullptr, 0, -1, Soon());
      return;
    }
    std::vector<char> got(64, 'x');
    try {
      g->SendRecv(nullptr, 0, -1, got.data(), got.size(), 0, Soon());
      ADD_FAILURE() << "a 100-byte message was received into 64 bytes";
    } catch (const Error& e) {
      EXPECT_EQ(ErrorKind::kInvalidArgument, e.kind());
      EXPECT_NE(std::string::npos, std::string(e.what()).find("expected 64 bytes from rank 10"))
          << e.what();
      EXPECT_NE(std::string::npos, std::string(e.what()).find("sent 100")) << e.what();
    }
    EXPECT_EQ(std::vector<char>(64, 'x'), got);
  });
}

TEST(ShmP2PTest, AReceiveNobodySendsTimesOutNamingThePeer) {
  auto store = MakeMemoryStore();
  RunRanks(2, [&](int r) {
    auto g = JoinShmGroup(r, 2, store);
    if (r == 0) {
      g->Barrier(Soon());  // stays attached until rank 1 is done
      return;
    }
    std::vector<char> got(16);
    const auto t0 = Clock::now();
    try {
      g->SendRecv(nullptr, 0, -1, got.data(), got.size(), 0, t0 + std::chrono::milliseconds(300));
      ADD_FAILURE() << "received a message nobody sent";
    } catch (const Error& e) {
      EXPECT_EQ(ErrorKind::kTimeout, e.kind()) << e.what();
      EXPECT_NE(std::string::npos,
                std::string(e.what()).find("recv from rank 10 (received 0 of 16"))
          << e.what();
    }
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
    g->Barrier(Soon());
  });
}

TEST(ShmP2PTest, AbortReleasesABlockedSend) {
  auto store = MakeMemoryStore();
  std::vector<std::unique_ptr<ShmGroup>> groups(2);
  RunRanks(2, [&](int r) { groups[r] = JoinShmGroup(r, 2, store, /*attach=*/false); });
  // Rank 1 never receives, so a message four times the ring blocks rank 0 until the abort.
  auto send = std::async(std::launch::async, [&] {
    groups[0]->Attach();
    std::vector<char> msg(4096);
    const auto t0 = Clock::now();
    bool threw = false;
    try {
      groups[0]->SendRecv(msg.data(), msg.size(), 1, nullptr, 0, -1, Soon());
    } catch (const Error& e) {
      threw = true;
      EXPECT_NE(std::string::npos, std::string(e.what()).find("aborted")) << e.what();
    }
    groups[0]->Detach();
    return threw ? Clock::now() - t0 : Clock::duration::max();
  });
  groups[0]->Abort();
  EXPECT_LT(send.get(), std::chrono::seconds(5));
}

}  // namespace
}  // namespace dlaunch::core
