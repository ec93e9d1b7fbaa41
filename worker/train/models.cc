#include "worker/train/models.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <cmath>

#include "core/error.h"

namespace dlaunch::worker {
namespace nn = torch::nn;

torch::nn::Sequential MakeModel(const std::string& name, const ModelShape& shape) {
  if (name == "mlp") {
    return nn::Sequential(nn::Linear(shape.feature_dim, shape.hidden), nn::ReLU(),
                          nn::Linear(shape.hidden, shape.hidden), nn::ReLU(),
                          nn::Linear(shape.hidden, shape.classes));
  }
  if (name == "cnn") {
    auto side =
        static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(shape.feature_dim))));
    if (side * side != shape.feature_dim || side < 8) {
      throw UsageError("train: --model cnn needs square 1 x S x S inputs with S >= 8; got " +
                       std::to_string(shape.feature_dim) + " features");
    }
    int64_t pooled = (side / 2) / 2;
    return nn::Sequential(nn::Unflatten(nn::UnflattenOptions(1, {1, side, side})),
                          nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1)), nn::ReLU(),
                          nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)),
                          nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(),
                          nn::Linear(32 * pooled * pooled, 128), nn::ReLU(),
                          nn::Linear(128, shape.classes));
  }
  throw UsageError("train: unknown --model '" + name + "' (mlp | cnn)");
}

}  // namespace dlaunch::worker
