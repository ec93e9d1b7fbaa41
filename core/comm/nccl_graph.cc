// The CUDA-graph part of the NCCL communicator (nccl-tests' -G): capture of ops into a graph on
// the communicator's stream, and its launches as tracked ops.
#include "core/comm/nccl_check.h"
#include "core/comm/nccl_communicator.h"
#include "core/error.h"

namespace dlaunch::core {

// One captured CUDA graph; each Launch is one op in the flight recorder ("cuda_graph").
class NcclGraph : public OpGraph {
 public:
  NcclGraph(NcclCommunicator* comm, cudaGraph_t graph, cudaGraphExec_t exec, int ops)
      : comm_(comm), graph_(graph), exec_(exec), ops_(ops) {}
  // A graph still running is freed by CUDA once it completes.
  ~NcclGraph() override {
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  std::shared_ptr<Work> Launch(int times) override {
    return comm_->LaunchGraph(exec_, times, ops_);
  }

 private:
  NcclCommunicator* const comm_;
  const cudaGraph_t graph_;
  const cudaGraphExec_t exec_;
  const int ops_;
};

std::unique_ptr<OpGraph> NcclCommunicator::Capture(const std::function<void()>& issue) {
  const std::string what = "rank " + std::to_string(rank_) + ": nccl graph capture";
  {
    std::lock_guard<std::mutex> lock(launch_mu_);
    if (aborted_) throw Error(ErrorKind::kInternal, what + ": communicator aborted");
    DLAUNCH_CUDA_CHECK(cudaSetDevice(device_));
    // Thread-local, as nccl-tests captures its timed iterations: NCCL may cudaMalloc on first use
    // of a peer connection, and the watchdog thread keeps querying events and the communicator
    // while we capture; in global mode such calls from other threads would invalidate the
    // capture. (nccl-tests captures its one-op check in global mode, having no such thread.)
    DLAUNCH_CUDA_CHECK(cudaStreamBeginCapture(AsStream(stream_), cudaStreamCaptureModeThreadLocal));
    captured_ops_ = 0;
    capture_error_.clear();
    capturing_ = true;
  }
  auto end_capture = [this](cudaGraph_t* graph) {
    std::lock_guard<std::mutex> lock(launch_mu_);
    capturing_ = false;
    return cudaStreamEndCapture(AsStream(stream_), graph);
  };
  cudaGraph_t graph = nullptr;
  try {
    issue();
  } catch (...) {
    if (end_capture(&graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  cudaError_t ended = end_capture(&graph);
  std::string failed;
  {
    std::lock_guard<std::mutex> lock(launch_mu_);
    failed = capture_error_;
  }
  if (!failed.empty() || ended != cudaSuccess) {
    if (ended == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
    if (!failed.empty()) throw Error(ErrorKind::kInternal, what + " failed: " + failed);
    DLAUNCH_CUDA_CHECK(ended);
  }
  cudaGraphExec_t exec = nullptr;
  cudaError_t made = cudaGraphInstantiateWithFlags(&exec, graph, 0);
  if (made != cudaSuccess) {
    cudaGraphDestroy(graph);
    DLAUNCH_CUDA_CHECK(made);
  }
  return std::make_unique<NcclGraph>(this, graph, exec, captured_ops_);
}

std::shared_ptr<Work> NcclCommunicator::LaunchGraph(void* exec, int times, int ops) {
  int64_t seq = recorder_.Record("cuda_graph", DataType::kUint8,
                                 static_cast<size_t>(ops) * static_cast<size_t>(times), 0);
  return Launch({seq}, "cuda_graph", [&] {
    for (int i = 0; i < times; ++i) {
      DLAUNCH_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), AsStream(stream_)));
    }
    return static_cast<int>(ncclSuccess);
  });
}

}  // namespace dlaunch::core
