// The memory side of the NCCL communicator: device buffers, the copies in and out of them, and
// buffers registered with the communicator (nccl-tests' -R 1 and -R 2).
#include <string>

#include "core/comm/nccl_check.h"
#include "core/comm/nccl_communicator.h"
#include "core/comm/nccl_plan.h"
#include "core/error.h"

namespace dlaunch::core {
namespace {

#ifdef NCCL_WIN_REQUIRED_ALIGNMENT
constexpr size_t kWindowAlignment = NCCL_WIN_REQUIRED_ALIGNMENT;
#else
constexpr size_t kWindowAlignment = 4096;
#endif

}  // namespace

std::shared_ptr<void> NcclCommunicator::Allocate(size_t bytes) {
  DLAUNCH_CUDA_CHECK(cudaSetDevice(device_));
  void* ptr = nullptr;
  DLAUNCH_CUDA_CHECK(cudaMalloc(&ptr, bytes == 0 ? 1 : bytes));
  return std::shared_ptr<void>(ptr, [](void* p) { cudaFree(p); });
}

void NcclCommunicator::CopyIn(Buffer dst, const void* host) {
  if (dst.bytes() == 0) return;
  // On our stream, so the copy is ordered with the collectives, and finished before we return.
  DLAUNCH_CUDA_CHECK(cudaSetDevice(device_));
  DLAUNCH_CUDA_CHECK(
      cudaMemcpyAsync(dst.ptr, host, dst.bytes(), cudaMemcpyHostToDevice, AsStream(stream_)));
  DLAUNCH_CUDA_CHECK(cudaStreamSynchronize(AsStream(stream_)));
}

void NcclCommunicator::CopyOut(void* host, Buffer src) {
  if (src.bytes() == 0) return;
  DLAUNCH_CUDA_CHECK(cudaSetDevice(device_));
  DLAUNCH_CUDA_CHECK(
      cudaMemcpyAsync(host, src.ptr, src.bytes(), cudaMemcpyDeviceToHost, AsStream(stream_)));
  DLAUNCH_CUDA_CHECK(cudaStreamSynchronize(AsStream(stream_)));
}

std::shared_ptr<void> NcclCommunicator::AllocateRegistered(size_t bytes, BufferRegistration reg) {
  if (reg == BufferRegistration::kNone) return Allocate(bytes);
  int runtime = 0;
  DLAUNCH_NCCL_CHECK(ncclGetVersion(&runtime), nullptr);
  if (std::string why = RegistrationRefusal(reg, NCCL_VERSION_CODE, runtime); !why.empty()) {
    // What the user asked for (-R) cannot be had here: bad input, as a usage error.
    throw UsageError("rank " + std::to_string(rank_) + ": " + why);
  }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 19, 0)
  const std::string what = "rank " + std::to_string(rank_) + ": nccl " + RegistrationName(reg) +
                           " registration of " + std::to_string(bytes) + " bytes";
  std::shared_ptr<PollTarget> alive = poll_target_;
  std::lock_guard<std::mutex> lock(launch_mu_);
  if (aborted_) throw Error(ErrorKind::kInternal, what + ": communicator aborted");
  DLAUNCH_CUDA_CHECK(cudaSetDevice(device_));
  // ncclMemAlloc's memory (cuMem, as nccl-tests allocates) is what every registration path of
  // NCCL accepts, NVLS included; windows also need NCCL's alignment.
  const size_t rounded =
      ((bytes == 0 ? 1 : bytes) + kWindowAlignment - 1) / kWindowAlignment * kWindowAlignment;
  void* ptr = nullptr;
  DLAUNCH_NCCL_CHECK(ncclMemAlloc(&ptr, rounded), comm_);
  void* handle = nullptr;  // ncclCommRegister's handle or the ncclWindow_t
  if (reg == BufferRegistration::kLocal) {
    // Not a group task: the handle is there on return, also on a non-blocking communicator.
    ncclResult_t res = ncclCommRegister(AsComm(comm_), ptr, rounded, &handle);
    if (res != ncclSuccess) {
      ncclMemFree(ptr);
      DLAUNCH_NCCL_CHECK(res, comm_);
    }
  } else {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
    // A group task (collective, like nccl-tests' grouped registrations): on a non-blocking
    // communicator the call returns ncclInProgress and NCCL's group thread writes the window
    // when the task completes. So the window lives on the heap and is read only once the
    // communicator is ready again. If that wait fails the task may still be running: the slot
    // and the memory are left to it rather than freed under it (the communicator is lost then).
    auto* window = new ncclWindow_t(nullptr);
    ncclResult_t res =
        ncclCommWindowRegister(AsComm(comm_), ptr, rounded, window, NCCL_WIN_COLL_SYMMETRIC);
    if (res != ncclSuccess && res != ncclInProgress) {
      delete window;
      ncclMemFree(ptr);
      DLAUNCH_NCCL_CHECK(res, comm_);
    }
    if (res == ncclInProgress) AwaitEnqueued(what);
    handle = *window;  // nullptr where NCCL has no symmetric support for this communicator
    delete window;
#endif
  }
  // Deregistered before ncclMemFree, as nccl-tests does, while the communicator lives; NCCL
  // drops what is still registered at ncclCommDestroy/ncclCommAbort, and the memory is freed
  // after that. The buffer must be idle when its last reference goes.
  return std::shared_ptr<void>(ptr, [reg, handle, alive](void* p) {
    {
      std::lock_guard<std::mutex> hold(alive->mu);
      if (alive->self != nullptr) alive->self->Deregister(reg, handle);
    }
    ncclMemFree(p);
  });
#else
  return nullptr;  // refused above: these headers have no registration
#endif
}

void NcclCommunicator::Deregister(BufferRegistration reg, void* handle) {
  std::lock_guard<std::mutex> lock(launch_mu_);
  if (aborted_) return;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 19, 0)
  if (reg == BufferRegistration::kLocal) {
    ncclCommDeregister(AsComm(comm_), handle);
    return;
  }
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
  ncclCommWindowDeregister(AsComm(comm_), static_cast<ncclWindow_t>(handle));
#endif
}

}  // namespace dlaunch::core
