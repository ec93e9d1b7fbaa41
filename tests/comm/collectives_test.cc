// Every op and dtype of the gloo communicator at sizes 0, 1, odd and several MiB, world sizes 1-4,
// ranks as threads over real TCP on loopback.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "core/comm/comm_options.h"
#include "core/comm/flight_recorder.h"
#include "core/comm/reduce_kernels.h"
#include "core/error.h"
#include "tests/comm/rank_threads.h"

namespace dlaunch::core {
namespace {

using testing::GlooOptions;
using testing::RunRanks;

constexpr std::chrono::seconds kWait(30);

const DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                           DataType::kBFloat16, DataType::kInt32,   DataType::kInt64};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax};

// Small integers: exact in every dtype (bf16 included) even after summing four ranks.
double Value(int rank, size_t i) { return static_cast<double>((rank + 1) + (i % 7)); }

bool IsInteger(DataType t) { return t == DataType::kInt32 || t == DataType::kInt64; }

double Expected(ReduceOp op, DataType t, int size, size_t i) {
  double sum = 0, mn = 1e300, mx = -1e300;
  for (int r = 0; r < size; ++r) {
    sum += Value(r, i);
    mn = std::min(mn, Value(r, i));
    mx = std::max(mx, Value(r, i));
  }
  double v = sum;
  if (op == ReduceOp::kMin) v = mn;
  if (op == ReduceOp::kMax) v = mx;
  if (op == ReduceOp::kAvg) v = IsInteger(t) ? std::floor(sum / size) : sum / size;
  // Round through the dtype, as the result was.
  std::vector<char> tmp(8);
  StoreFromDouble(tmp.data(), 0, t, v);
  return LoadAsDouble(tmp.data(), 0, t);
}

std::vector<char> Filled(int rank, size_t count, DataType t) {
  std::vector<char> buf(count * DataTypeSize(t) + 1);
  for (size_t i = 0; i < count; ++i) StoreFromDouble(buf.data(), i, t, Value(rank, i));
  return buf;
}

std::string Where(const char* op, DataType t, size_t count, int rank, size_t i) {
  std::ostringstream s;
  s << op << " dtype " << DataTypeName(t) << " count " << count << " rank " << rank << " elem "
    << i;
  return s.str();
}

// Checks every element; returns the number of mismatches and reports the first.
size_t CountWrong(const std::vector<char>& buf, size_t count, DataType t,
                  const std::function<double(size_t)>& want, const std::string& what) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    double got = LoadAsDouble(buf.data(), i, t);
    if (got != want(i)) {
      if (wrong == 0)
        ADD_FAILURE() << what << " elem " << i << ": got " << got << " want " << want(i);
      ++wrong;
    }
  }
  return wrong;
}

void RunAllCollectives(Communicator& comm, size_t count, DataType t) {
  const int rank = comm.rank();
  const int n = comm.size();
  for (ReduceOp op : kOps) {
    auto buf = Filled(rank, count, t);
    comm.AllReduce({buf.data(), count, t}, op)->Wait(kWait);
    EXPECT_EQ(0u, CountWrong(
                      buf, count, t, [&](size_t i) { return Expected(op, t, n, i); },
                      Where("allreduce", t, count, rank, 0) + " " + ReduceOpName(op)));
  }
  {
    int root = n - 1;
    auto buf = Filled(rank, count, t);
    comm.Broadcast({buf.data(), count, t}, root)->Wait(kWait);
    EXPECT_EQ(0u, CountWrong(
                      buf, count, t, [&](size_t i) { return Value(root, i); },
                      Where("broadcast", t, count, rank, 0)));
  }
  {
    auto in = Filled(rank, count, t);
    std::vector<char> out(count * n * DataTypeSize(t) + 1);
    comm.AllGather({in.data(), count, t}, {out.data(), count * n, t})->Wait(kWait);
    EXPECT_EQ(0u, CountWrong(
                      out, count * n, t,
                      [&](size_t i) { return Value(static_cast<int>(i / count), i % count); },
                      Where("allgather", t, count, rank, 0)));
  }
  for (ReduceOp op : kOps) {
    // Input element j of block b is Value(rank, b * count + j); block `rank` comes back reduced.
    auto in = Filled(rank, count * n, t);
    std::vector<char> out(count * DataTypeSize(t) + 1);
    comm.ReduceScatter({in.data(), count * n, t}, {out.data(), count, t}, op)->Wait(kWait);
    EXPECT_EQ(0u, CountWrong(
                      out, count, t, [&](size_t j) { return Expected(op, t, n, rank * count + j); },
                      Where("reduce_scatter", t, count, rank, 0) + " " + ReduceOpName(op)));
  }
  {
    // Block p of rank r's input goes to rank p's block r: encode (sender, block) in the values.
    size_t total = count * n;
    std::vector<char> in(total * DataTypeSize(t) + 1), out(total * DataTypeSize(t) + 1);
    for (size_t i = 0; i < total; ++i) {
      StoreFromDouble(in.data(), i, t,
                      rank * 8 + static_cast<double>(i / std::max<size_t>(count, 1)));
    }
    comm.AllToAll({in.data(), total, t}, {out.data(), total, t})->Wait(kWait);
    EXPECT_EQ(0u, CountWrong(
                      out, total, t, [&](size_t i) { return (i / count) * 8.0 + rank; },
                      Where("alltoall", t, count, rank, 0)));
  }
  if (n > 1) {
    // A ring: everybody sends right and receives from the left at once.
    auto send = Filled(rank, count, t);
    std::vector<char> recv(count * DataTypeSize(t) + 1);
    int left = (rank + n - 1) % n;
    comm.SendRecv({send.data(), count, t}, (rank + 1) % n, {recv.data(), count, t}, left)
        ->Wait(kWait);
    EXPECT_EQ(0u, CountWrong(
                      recv, count, t, [&](size_t i) { return Value(left, i); },
                      Where("sendrecv", t, count, rank, 0)));
    // Plain Send/Recv between ranks 0 and 1.
    if (rank == 0) comm.Send({send.data(), count, t}, 1)->Wait(kWait);
    if (rank == 1) {
      comm.Recv({recv.data(), count, t}, 0)->Wait(kWait);
      EXPECT_EQ(0u, CountWrong(
                        recv, count, t, [&](size_t i) { return Value(0, i); },
                        Where("recv", t, count, rank, 0)));
    }
  }
  comm.Barrier()->Wait(kWait);
}

// How the ranks of a test world reach each other.
struct Transport {
  const char* name;
  const char* transport;  // CommOptions::transport
  size_t slot_bytes;      // 0 = default; small slots force every op through many chunks
  // Simulated hosts: "" = one; "round_robin" = two, ranks dealt alternately (hosts are not
  // contiguous); "uneven" = rank 1 alone on a host, the others on another.
  const char* hosts;
  size_t big_bytes;  // the largest message of the sweep
};

void PrintTo(const Transport& tr, std::ostream* os) { *os << tr.name; }

int HostOf(const Transport& tr, int rank) {
  if (std::string(tr.hosts) == "round_robin") return rank % 2;
  if (std::string(tr.hosts) == "uneven") return rank == 1;
  return 0;
}

const Transport kTransports[] = {
    {"tcp", "tcp", 0, "", 3u << 20},
    {"shm", "shm", 0, "", 3u << 20},
    // 1001 elements of any dtype outgrow a 1 KiB slot.
    {"shm_small_slot", "shm", 1024, "", 40u << 10},
    {"two_hosts", "shm", 1024, "round_robin", 40u << 10},
    {"uneven_hosts", "shm", 0, "uneven", 3u << 20},
};

class CollectivesTest : public ::testing::TestWithParam<std::tuple<int, Transport>> {};

TEST_P(CollectivesTest, EveryOpAndDtypeAtEverySize) {
  const int n = std::get<0>(GetParam());
  const Transport tr = std::get<1>(GetParam());
  auto store = MakeMemoryStore();
  RunRanks(n, [&](int rank) {
    CommOptions o = GlooOptions(rank, n, store);
    o.transport = tr.transport;
    o.shm_slot_bytes = tr.slot_bytes;
    o.host_id = "host" + std::to_string(HostOf(tr, rank));
    auto comm = MakeCommunicator(o);
    ASSERT_STREQ("gloo", comm->backend());
    ASSERT_EQ(n, comm->size());
    // Shared memory wherever a host has several ranks; TCP between hosts and where none has.
    bool any_shared = false;
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) any_shared |= HostOf(tr, a) == HostOf(tr, b);
    }
    const bool shm = std::string(tr.transport) == "shm" && any_shared;
    for (int peer = 0; peer < n; ++peer) {
      const bool local = shm && HostOf(tr, peer) == HostOf(tr, rank);
      EXPECT_STREQ(local ? "shm" : "tcp", comm->CollectivePath(peer)) << "peer " << peer;
    }
    for (DataType t : kTypes) {
      // 0, 1, odd, and the largest (plus an odd tail).
      const size_t big = tr.big_bytes / DataTypeSize(t) + 3;
      for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, big})
        RunAllCollectives(*comm, count, t);
    }
    // Every call went through the flight recorder and completed.
    auto entries = comm->flight_recorder().Entries();
    ASSERT_FALSE(entries.empty());
    for (const auto& e : entries) EXPECT_EQ(OpState::kCompleted, e.state) << e.op << " " << e.seq;
    EXPECT_EQ(comm->flight_recorder().last_started_seq(),
              comm->flight_recorder().last_completed_seq());
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollectivesTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::ValuesIn(kTransports)),
                         [](const ::testing::TestParamInfo<std::tuple<int, Transport>>& info) {
                           return std::string(std::get<1>(info.param).name) + "_" +
                                  std::to_string(std::get<0>(info.param)) + "ranks";
                         });

TEST(CommFactoryTest, RejectsUnknownBackend) {
  CommOptions o;
  o.backend = "mpi";
  EXPECT_THROW(MakeCommunicator(o), UsageError);
}

TEST(CommFactoryTest, AutoIsGlooWithoutGpu) {
  if (NcclAvailable()) GTEST_SKIP() << "a GPU is visible";
  EXPECT_EQ("gloo", ResolveBackend("auto"));
  CommOptions o;
  auto comm = MakeCommunicator(o);
  EXPECT_STREQ("gloo", comm->backend());
}

TEST(CommFactoryTest, ManyRanksNeedAStore) {
  CommOptions o;
  o.size = 2;
  EXPECT_THROW(MakeCommunicator(o), UsageError);
}

TEST(CommFactoryTest, RendezvousTimesOutWhenAPeerNeverComes) {
  CommOptions o = GlooOptions(0, 2, MakeMemoryStore());
  o.rendezvous_timeout = std::chrono::milliseconds(300);
  try {
    MakeCommunicator(o);
    FAIL() << "rendezvous with an absent peer succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(ErrorKind::kTimeout, e.kind()) << e.what();
  }
}

TEST(CommArgumentsTest, MismatchedBuffersThrowAtOnce) {
  auto comm = MakeCommunicator(CommOptions{});
  std::vector<float> a(4), b(3);
  EXPECT_THROW(comm->AllGather({a.data(), 4}, {b.data(), 3}), Error);
  EXPECT_THROW(comm->Send({a.data(), 4}, 0), Error);  // self is not a peer
}

}  // namespace
}  // namespace dlaunch::core
