// A user's own libtorch training loop made data-parallel with dlaunch:
//
//   dlaunch --nproc 2 -- build/examples/cpp_ddp/cpp_ddp_example [steps]
//
// Runtime::FromEnv() joins the job (rank, world size, the coordinator's key/value store),
// MakeCommunicator() builds the Gloo communicator on that store, and DistributedDataParallel
// broadcasts the initial weights and averages gradients during backward. Without a launcher it
// runs as a world of one.
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/comm/comm_options.h"
#include "core/runtime.h"
#include "ddp/ddp.h"

int main(int argc, char** argv) {
  namespace core = dlaunch::core;
  const int steps = argc > 1 ? std::atoi(argv[1]) : 50;
  try {
    auto runtime = core::Runtime::FromEnv();
    core::CommOptions comm_options;
    comm_options.backend = "gloo";
    comm_options.rank = runtime->rank();
    comm_options.size = runtime->world_size();
    comm_options.store = core::MakePrefixStore("cpp_ddp/", runtime->store());
    std::shared_ptr<core::Communicator> comm = core::MakeCommunicator(comm_options);

    // Each rank seeds differently on purpose: the DDP constructor makes rank 0's weights
    // everyone's.
    torch::manual_seed(runtime->rank());
    torch::nn::Sequential model(torch::nn::Linear(8, 32), torch::nn::ReLU(),
                                torch::nn::Linear(32, 1));
    dlaunch::ddp::DistributedDataParallel ddp(model->parameters(), comm);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));

    // Learn y = sum(x); every rank draws its own data shard.
    for (int step = 1; step <= steps; ++step) {
      torch::Tensor x = torch::randn({64, 8});
      torch::Tensor y = x.sum(1, /*keepdim=*/true);
      torch::Tensor loss = torch::nn::functional::mse_loss(model->forward(x), y);
      loss.backward();  // returns with gradients averaged over all ranks
      optimizer.step();
      optimizer.zero_grad();
      runtime->UpdateStatus([&](core::RankStatus& s) {
        s.step = step;
        s.loss = loss.item<double>();
      });
      if (runtime->rank() == 0 && (step % 10 == 0 || step == steps)) {
        std::printf("step %d/%d loss %.4f (%d ranks)\n", step, steps, loss.item<double>(),
                    runtime->world_size());
      }
    }
    // Identical weights on every rank: the all-reduced gradients kept them in lockstep.
    double checksum = 0;
    for (const auto& p : model->parameters()) checksum += p.sum().item<double>();
    std::printf("rank %d parameter checksum %.6f\n", runtime->rank(), checksum);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cpp_ddp_example: %s\n", e.what());
    return 1;
  }
}
