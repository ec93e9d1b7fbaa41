#include "worker/train/models.h"

#include <torch/autograd.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <cmath>

#include "core/error.h"

namespace dlaunch::worker {
namespace nn = torch::nn;

namespace {

nn::Conv2d Conv3x3(int64_t in, int64_t out, int64_t stride = 1) {
  // No bias: the batch norm after it has one.
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

// nn::Linear whose product runs as a 1 x 1 convolution: oneDNN's convolution instead of the linked
// BLAS's sgemm. The parameters keep nn::Linear's names, shapes and initialisation, so a checkpoint
// loads into either.
class OneDnnLinearImpl : public nn::LinearImpl {
 public:
  using nn::LinearImpl::LinearImpl;

  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t n = x.size(0);
    return torch::conv2d(x.reshape({n, -1, 1, 1}), weight.view({weight.size(0), -1, 1, 1}), bias)
        .view({n, -1});
  }
};
TORCH_MODULE(OneDnnLinear);

nn::AnyModule Linear(int64_t in, int64_t out, bool onednn) {
  if (onednn) return nn::AnyModule(OneDnnLinear(in, out));
  return nn::AnyModule(nn::Linear(in, out));
}

// 2 x 2 max pooling with libtorch's NCHW results bit for bit (the same maxima, and the same
// first-maximum indices for the backward) through its channels-last CPU kernels, which are
// vectorised over the channels: 0.2 ms against 1.9 ms for 32 x 32 x 28 x 28 on 2 threads. The
// gradient goes back in NCHW, so batch norm's backward runs (and rounds) as it would without.
struct ChannelsLastMaxPool2 : torch::autograd::Function<ChannelsLastMaxPool2> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
    torch::Tensor input = x.contiguous(at::MemoryFormat::ChannelsLast);
    auto [out, indices] = torch::max_pool2d_with_indices(input, 2);
    ctx->save_for_backward({input, indices});
    return out.contiguous();
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    return {
        torch::max_pool2d_with_indices_backward(grads[0].contiguous(at::MemoryFormat::ChannelsLast),
                                                saved[0], 2, 2, 0, 1, false, saved[1])
            .contiguous()};
  }
};

class MaxPool2Impl : public nn::Module {
 public:
  torch::Tensor forward(const torch::Tensor& x) {
    if (!x.is_cpu()) return torch::max_pool2d(x, 2);
    return ChannelsLastMaxPool2::apply(x);
  }
};
TORCH_MODULE(MaxPool2);

// ResNet's basic block: two 3x3 convolutions with batch norm, plus the input (through a 1x1
// convolution where the shape changes).
class BasicBlockImpl : public nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride)
      : conv1_(register_module("conv1", Conv3x3(in, out, stride))),
        bn1_(register_module("bn1", nn::BatchNorm2d(out))),
        conv2_(register_module("conv2", Conv3x3(out, out))),
        bn2_(register_module("bn2", nn::BatchNorm2d(out))) {
    if (stride != 1 || in != out) {
      shortcut_ = register_module(
          "shortcut",
          nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                         nn::BatchNorm2d(out)));
    }
  }

  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor y = torch::relu(bn1_->forward(conv1_->forward(x)));
    y = bn2_->forward(conv2_->forward(y));
    return torch::relu(y + (shortcut_ ? shortcut_->forward(x) : x));
  }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::Sequential shortcut_{nullptr};
};
TORCH_MODULE(BasicBlock);

}  // namespace

torch::nn::Sequential MakeModel(const std::string& name, const ModelShape& shape) {
  if (name == "mlp") {
    nn::Sequential m;
    m->push_back(Linear(shape.feature_dim, shape.hidden, shape.onednn_linear));
    m->push_back(nn::ReLU());
    m->push_back(Linear(shape.hidden, shape.hidden, shape.onednn_linear));
    m->push_back(nn::ReLU());
    m->push_back(Linear(shape.hidden, shape.classes, shape.onednn_linear));
    return m;
  }
  int64_t h = shape.height, w = shape.width;
  if (h == 0) {
    h = w = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(shape.feature_dim))));
    if (h * w != shape.feature_dim) h = w = 0;
  }
  if (h < 8 || w < 8) {
    throw UsageError("train: --model " + name +
                     " needs 1 x H x W image inputs with H, W >= 8; got " +
                     std::to_string(shape.feature_dim) + " features");
  }
  nn::Sequential m(nn::Unflatten(nn::UnflattenOptions(1, {1, h, w})));
  if (name == "cnn") {
    // Each block pools before its ReLU: the same values and gradients (max and ReLU commute, and
    // a window whose maximum is not positive passes no gradient either way), with the ReLU on a
    // quarter of the elements.
    m->push_back(Conv3x3(1, 32));
    m->push_back(nn::BatchNorm2d(32));
    m->push_back(MaxPool2());
    m->push_back(nn::ReLU());
    m->push_back(Conv3x3(32, 64));
    m->push_back(nn::BatchNorm2d(64));
    m->push_back(MaxPool2());
    m->push_back(nn::ReLU());
    m->push_back(nn::Flatten());
    m->push_back(Linear(64 * (h / 4) * (w / 4), 128, shape.onednn_linear));
    m->push_back(nn::ReLU());
    m->push_back(Linear(128, shape.classes, shape.onednn_linear));
    return m;
  }
  if (name == "resnet") {
    m->push_back(Conv3x3(1, 16));
    m->push_back(nn::BatchNorm2d(16));
    m->push_back(nn::ReLU());
    int64_t in = 16;
    for (int64_t out : {16, 32, 64}) {
      for (int b = 0; b < 2; ++b) {
        m->push_back(BasicBlock(in, out, b == 0 && out != 16 ? 2 : 1));
        in = out;
      }
    }
    m->push_back(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({1, 1})));
    m->push_back(nn::Flatten());
    m->push_back(Linear(64, shape.classes, shape.onednn_linear));
    return m;
  }
  throw UsageError("train: unknown --model '" + name + "' (cnn | mlp | resnet)");
}

}  // namespace dlaunch::worker
