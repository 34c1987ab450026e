// kernelcast's fake CUDA runtime for CPU-only PyTorch builds.
//
// A CPU build of torch has no CUDA device guard and CUDA hooks that say "not built". Fake tensors on a
// "cuda" device then run forward fine, but autograd aborts the process: the engine asks the device guard
// for the tensor's stream and the accelerator hooks for the device. Registering torch's own
// FakeGuardImpl<CUDA> plus hooks that report a CUDA build makes autograd work on fake CUDA tensors. Nothing
// here touches a GPU: every kernel still goes to FakeTensorMode.
//
// The hooks must be registered before `import torch` initialises torch._C, which caches them; the guard
// may come later. kernelcast/_fake_cuda.py builds this file once per torch version and loads it.
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/FakeGuardImpl.h>

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

// Registered under torch's own key so that at::detail::getCUDAHooks() finds it.
C10_REGISTER_TYPED_CLASS(CUDAHooksRegistry, "CUDAHooks", FakeCUDAHooks);

}  // namespace at
