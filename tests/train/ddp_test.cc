// DistributedDataParallel over real Gloo, ranks as threads: N ranks with batch b must end where one
// rank with batch N*b ends, whatever the bucket size, with or without gradient accumulation.
#include "ddp/ddp.h"

#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <atomic>
#include <limits>
#include <mutex>

#include "core/comm/comm_options.h"
#include "core/error.h"
#include "core/store.h"
#include "ddp/grad_scaler.h"
#include "tests/train/train_test_util.h"

namespace dlaunch::ddp {
namespace {

constexpr int64_t kFeatures = 12, kClasses = 5, kHidden = 24;
std::mutex g_seed_mu;

torch::nn::Sequential NewModel() {
  std::lock_guard<std::mutex> lock(g_seed_mu);
  torch::manual_seed(3);
  return torch::nn::Sequential(torch::nn::Linear(kFeatures, kHidden), torch::nn::ReLU(),
                               torch::nn::Linear(kHidden, kHidden), torch::nn::Tanh(),
                               torch::nn::Linear(kHidden, kClasses));
}

struct Data {
  torch::Tensor x, y;
};

Data MakeData(int64_t n) {
  auto gen = at::detail::createCPUGenerator(99);
  return {torch::randn({n, kFeatures}, gen), torch::randint(0, kClasses, {n}, gen)};
}

std::shared_ptr<core::Communicator> MakeComm(int rank, int size,
                                             const std::shared_ptr<core::Store>& store) {
  core::CommOptions o;
  o.backend = "gloo";
  o.rank = rank;
  o.size = size;
  o.store = store;
  o.timeout = std::chrono::seconds(60);
  o.rendezvous_timeout = std::chrono::seconds(60);
  return core::MakeCommunicator(o);
}

// Trains `world` ranks for `steps` steps, rank r taking rows [ (s*world + r)*b*accum, ... ) so the
// union of a step's batches is the single-rank batch of the same step. Returns rank 0's parameters.
std::vector<torch::Tensor> Train(int world, int64_t b, int64_t accum, int64_t steps,
                                 double bucket_mb, const Data& data,
                                 std::vector<DdpStats>* stats = nullptr) {
  auto store = core::MakeMemoryStore();
  std::vector<std::vector<torch::Tensor>> result(world);
  std::vector<std::string> errors(world);
  if (stats) stats->assign(world, {});
  worker::testing::RunRanks(world, [&](int rank) {
    try {
      auto model = NewModel();
      if (rank != 0) {
        // Different initial weights on the other ranks: the broadcast must fix them.
        torch::NoGradGuard g;
        for (auto& p : model->parameters()) p.add_(0.5 * (rank + 1));
      }
      auto comm = MakeComm(rank, world, store);
      DdpOptions o;
      o.bucket_cap_mb = bucket_mb;
      DistributedDataParallel ddp(model->parameters(), comm, o);
      ddp.TakeStats();
      torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
      for (int64_t s = 0; s < steps; ++s) {
        for (int64_t m = 0; m < accum; ++m) {
          // Global batch of step s holds world*b*accum rows; micro-batch m of rank r is a slice.
          int64_t first = s * world * b * accum + (m * world + rank) * b;
          auto x = data.x.narrow(0, first, b), y = data.y.narrow(0, first, b);
          std::optional<DistributedDataParallel::NoSync> no_sync;
          if (m + 1 < accum) {
            no_sync.emplace(ddp);
            if (stats) ddp.TakeStats();  // drop the previous step's counts
          }
          auto loss = torch::nn::functional::cross_entropy(model->forward(x), y) /
                      static_cast<double>(accum);
          loss.backward();
          if (m + 1 < accum && stats) {
            EXPECT_EQ(ddp.TakeStats().collectives, 0) << "communication on an accumulation step";
          }
        }
        opt.step();
        opt.zero_grad();
      }
      if (stats) (*stats)[rank] = ddp.TakeStats();
      for (auto& p : model->parameters()) result[rank].push_back(p.detach().clone());
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  // All ranks hold the same parameters.
  for (int r = 1; r < world; ++r) {
    for (size_t i = 0; i < result[0].size() && i < result[r].size(); ++i) {
      EXPECT_LE((result[r][i] - result[0][i]).abs().max().item<double>(), 1e-6)
          << "rank " << r << " param " << i;
    }
  }
  return result[0];
}

double MaxDiff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  }
  return d;
}

class DdpTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST(TensorBufferTest, CarriesTheTensorsMemoryCountAndDtype) {
  torch::Tensor d = torch::zeros({3, 2}, torch::kFloat64);
  core::Buffer b = TensorBuffer(d);
  EXPECT_EQ(b.ptr, d.data_ptr());
  EXPECT_EQ(b.count, 6u);
  EXPECT_EQ(b.dtype, core::DataType::kFloat64);
  EXPECT_EQ(b.device, core::DeviceType::kCpu);
  EXPECT_EQ(TensorBuffer(torch::zeros({1})).dtype, core::DataType::kFloat32);
  EXPECT_EQ(TensorBuffer(torch::zeros({1}, torch::kInt64)).dtype, core::DataType::kInt64);
  EXPECT_THROW(TensorBuffer(torch::zeros({1}, torch::kBool)), Error);
}

TEST_F(DdpTest, FourRanksMatchOneRankWithFourTimesTheBatch) {
  const int64_t b = 8, steps = 6;
  Data data = MakeData(4 * b * steps);
  auto single = Train(1, 4 * b, 1, steps, 25, data);
  std::vector<DdpStats> stats;
  auto multi = Train(4, b, 1, steps, 25, data, &stats);
  EXPECT_LE(MaxDiff(single, multi), 1e-5);
  // The run must have moved the weights, or equality says nothing.
  auto initial = NewModel()->parameters();
  EXPECT_GT(MaxDiff(std::vector<torch::Tensor>(initial.begin(), initial.end()), multi), 1e-3);
  // One bucket of all gradients per step (the model is far below 25 MiB).
  EXPECT_EQ(stats[0].collectives, steps);
}

TEST_F(DdpTest, BucketSizeDoesNotChangeTheResult) {
  const int64_t b = 4, steps = 4;
  Data data = MakeData(2 * b * steps);
  auto reference = Train(1, 2 * b, 1, steps, 25, data);
  for (double mb : {1e-6, 0.001, 0.002, 25.0, 4096.0}) {
    std::vector<DdpStats> stats;
    auto got = Train(2, b, 1, steps, mb, data, &stats);
    EXPECT_LE(MaxDiff(reference, got), 1e-5) << "bucket " << mb << " MiB";
    if (mb == 1e-6) {
      EXPECT_EQ(stats[0].collectives, 6 * steps);  // one bucket per parameter
    }
  }
}

TEST_F(DdpTest, GradientAccumulationCommunicatesOnlyOnTheLastMicroBatch) {
  const int64_t b = 4, steps = 3, accum = 3;
  Data data = MakeData(2 * b * accum * steps);
  auto single = Train(1, 2 * b * accum, 1, steps, 25, data);
  std::vector<DdpStats> stats;
  auto multi = Train(2, b, accum, steps, 0.002, data, &stats);
  EXPECT_LE(MaxDiff(single, multi), 1e-5);
}

// Forwards to a real communicator and counts the all-reduces issued so far.
class CountingCommunicator : public core::Communicator {
 public:
  explicit CountingCommunicator(std::shared_ptr<core::Communicator> inner)
      : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const char* backend() const override { return inner_->backend(); }
  std::shared_ptr<core::Work> AllReduce(core::Buffer b, core::ReduceOp op) override {
    ++allreduces;
    return inner_->AllReduce(b, op);
  }
  std::shared_ptr<core::Work> Broadcast(core::Buffer b, int root) override {
    return inner_->Broadcast(b, root);
  }
  std::shared_ptr<core::Work> AllGather(core::Buffer in, core::Buffer out) override {
    return inner_->AllGather(in, out);
  }
  std::shared_ptr<core::Work> ReduceScatter(core::Buffer in, core::Buffer out,
                                            core::ReduceOp op) override {
    return inner_->ReduceScatter(in, out, op);
  }
  std::shared_ptr<core::Work> AllToAll(core::Buffer in, core::Buffer out) override {
    return inner_->AllToAll(in, out);
  }
  std::shared_ptr<core::Work> Send(core::Buffer b, int peer) override {
    return inner_->Send(b, peer);
  }
  std::shared_ptr<core::Work> Recv(core::Buffer b, int peer) override {
    return inner_->Recv(b, peer);
  }
  std::shared_ptr<core::Work> SendRecv(core::Buffer send, int dst, core::Buffer recv,
                                       int src) override {
    return inner_->SendRecv(send, dst, recv, src);
  }
  std::shared_ptr<core::Work> Barrier() override { return inner_->Barrier(); }
  void Abort() override { inner_->Abort(); }
  core::FlightRecorder& flight_recorder() override { return inner_->flight_recorder(); }

  std::atomic<int> allreduces{0};

 private:
  std::shared_ptr<core::Communicator> inner_;
};

TEST_F(DdpTest, BucketsStartDuringBackward) {
  auto store = core::MakeMemoryStore();
  std::vector<int> seen_before_first_layer(2, -1);
  std::vector<int> total(2, -1);
  worker::testing::RunRanks(2, [&](int rank) {
    auto model = NewModel();
    auto comm = std::make_shared<CountingCommunicator>(MakeComm(rank, 2, store));
    DdpOptions o;
    o.bucket_cap_mb = 1e-6;  // one bucket per parameter
    DistributedDataParallel ddp(model->parameters(), comm, o);
    // The first layer's weight gets its gradient last; by then the later layers' buckets must
    // already be on the wire.
    model->parameters()[0].register_hook([&, rank](torch::Tensor g) {
      seen_before_first_layer[rank] = comm->allreduces.load();
      return g;
    });
    Data data = MakeData(8);
    torch::nn::functional::cross_entropy(model->forward(data.x), data.y).backward();
    total[rank] = comm->allreduces.load();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(total[r], 6) << "rank " << r;
    EXPECT_GE(seen_before_first_layer[r], 4) << "rank " << r;  // the two later layers
  }
}

// fp16's loss scaler across ranks: an inf in one rank's gradients makes every rank skip the step
// and halve its scale, so the replicas stay identical; the next finite step is taken everywhere.
TEST_F(DdpTest, GradScalerSkipsOnEveryRankWhenOneRankOverflows) {
  constexpr int kWorld = 3;
  auto store = core::MakeMemoryStore();
  std::vector<std::vector<int>> taken(kWorld);
  std::vector<std::vector<double>> scales(kWorld);
  std::vector<std::string> errors(kWorld);
  worker::testing::RunRanks(kWorld, [&](int rank) {
    try {
      GradScalerOptions o;
      o.init_scale = 256;
      o.growth_interval = 2;
      GradScaler scaler(o, torch::kCPU, MakeComm(rank, kWorld, store));
      for (int step = 0; step < 4; ++step) {
        // Step 1: only rank 1's gradients overflow (no all-reduce of gradients carries it).
        float g = step == 1 && rank == 1 ? std::numeric_limits<float>::infinity() : 256.0f;
        std::vector<torch::Tensor> grads = {torch::full({5}, g), torch::ones({2})};
        taken[rank].push_back(scaler.Unscale(grads));
        scaler.Update();
        scales[rank].push_back(scaler.scale());
      }
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(taken[r], (std::vector<int>{1, 0, 1, 1})) << "rank " << r;
    // 256; halved by the skip; the tracker restarts, so it grows on the second good step after it.
    EXPECT_EQ(scales[r], (std::vector<double>{256, 128, 128, 256})) << "rank " << r;
  }
}

}  // namespace
}  // namespace dlaunch::ddp
