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

class CollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesTest, EveryOpAndDtypeAtEverySize) {
  const int n = GetParam();
  auto store = MakeMemoryStore();
  RunRanks(n, [&](int rank) {
    auto comm = MakeCommunicator(GlooOptions(rank, n, store));
    ASSERT_STREQ("gloo", comm->backend());
    ASSERT_EQ(n, comm->size());
    for (DataType t : kTypes) {
      // 0, 1, odd, and several MiB (3 MiB + an odd tail).
      const size_t big = (3u << 20) / DataTypeSize(t) + 3;
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

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollectivesTest, ::testing::Values(1, 2, 3, 4));

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
