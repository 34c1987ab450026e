// kernelcast's fake CUDA runtime, for a torch that has no GPU to talk to: a CPU-only build, or a CUDA build
// on a machine without a GPU (or with none visible).
//
// A CPU build of torch has no CUDA device guard and CUDA hooks that say "not built". Fake tensors on a
// "cuda" device then run forward fine, but autograd aborts the process: the engine asks the device guard
// for the tensor's stream and the accelerator hooks for the device. A CUDA build without a GPU has real hooks
// that check every device index against a device count of 0 (`hasPrimaryContext expects a valid device
// index`, at the first backward) and answer "no" to bf16 cuDNN convolutions (the conv backend falls to
// Slow2d). Registering torch's own FakeGuardImpl<CUDA> plus hooks that report a CUDA build with cuDNN makes
// both builds capture the same way. Nothing here touches a GPU: every kernel still goes to FakeTensorMode.
//
// The hooks must be registered before the first at::detail::getCUDAHooks() call, which caches them. On a CUDA
// build, _fake_cuda.py loads libtorch_cuda.so (which registers the real hooks and guard) before this file:
// the hooks here take the registry key at a higher priority, and the guard registered here is stored last.
// kernelcast/_fake_cuda.py builds this file once per torch version and loads it before `import torch`.
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/FakeGuardImpl.h>
#if __has_include(<torch/csrc/distributed/c10d/reducer_timer.hpp>)
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>
#define KERNELCAST_HAS_REDUCER_TIMER 1
#endif

C10_REGISTER_GUARD_IMPL(CUDA, c10::impl::FakeGuardImpl<c10::DeviceType::CUDA>);

namespace at {
namespace {

// cuDNN 9.x; torch checks versions only to gate cuDNN paths (batch norm, attention) that CUDA builds take.
constexpr long kFakeCudnnVersion = 91000;
// cudnn.h defines CUDNN_BN_MIN_EPSILON as 0.0 since cuDNN 7.5.
constexpr double kCudnnBatchNormMinEpsilon = 0.0;

struct FakeCUDAHooks final : CUDAHooksInterface {
  explicit FakeCUDAHooks(CUDAHooksArgs /*unused*/) {}
  bool isBuilt() const override { return true; }
  // No primary context: the autograd engine then leaves the (fake) device alone.
  bool hasPrimaryContext(DeviceIndex /*device_index*/) const override { return false; }
  // Composite ops such as batch_norm choose their cuDNN kernel from these, as on a CUDA build.
  bool compiledWithCuDNN() const override { return true; }
  long versionCuDNN() const override { return kFakeCudnnVersion; }
  long versionRuntimeCuDNN() const override { return kFakeCudnnVersion; }
  bool supportsDilatedConvolutionWithCuDNN() const override { return true; }
  bool supportsDepthwiseConvolutionWithCuDNN() const override { return true; }
  bool supportsBFloat16ConvolutionWithCuDNNv8() const override { return true; }
  double batchnormMinEpsilonCuDNN() const override { return kCudnnBatchNormMinEpsilon; }
};

}  // namespace

// Registered under torch's own key so that at::detail::getCUDAHooks() finds it; above a CUDA build's own
// hooks, which are registered at the default priority (REGISTER_CUDA_HOOKS in CUDAHooks.cpp).
C10_REGISTER_TYPED_CLASS_WITH_PRIORITY(CUDAHooksRegistry, "CUDAHooks", c10::REGISTRY_PREFERRED, FakeCUDAHooks);

}  // namespace at

#ifdef KERNELCAST_HAS_REDUCER_TIMER
namespace c10d {
namespace {

// DDP's reducer times its first iterations with a timer made for its parameters' device. A CUDA build
// registers one that records CUDA events, which fails with no driver (`CUDA driver version is insufficient`
// in Reducer::prepare_for_forward); a CPU build has none. This one reads the host clock, as the reducer's
// CPU timer does: the times only feed DDP's logging, never the step.
struct HostClockTimer final : Timer {
  explicit HostClockTimer(c10::Device /*unused*/) {}
  std::optional<int64_t> measureDifference(Event start, Event end) override {
    auto start_ns = getTimestamp(start);
    auto end_ns = getTimestamp(end);
    if (!start_ns || !end_ns) {
      return std::nullopt;
    }
    return *end_ns - *start_ns;
  }
};

}  // namespace

C10_REGISTER_TYPED_CLASS_WITH_PRIORITY(TimerRegistry, c10::kCUDA, c10::REGISTRY_PREFERRED, HostClockTimer);

}  // namespace c10d
#endif
