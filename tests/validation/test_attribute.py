"""measure.attribute: each GPU work item handed to the aten op that launched it, once."""

from types import SimpleNamespace

from torch.autograd import DeviceType

from kernelcast.measure import attribute


def _cpu(name: str, start: float, kernels=(), parent=None):
    return SimpleNamespace(name=name, device_type=DeviceType.CPU,
                           time_range=SimpleNamespace(start=start, end=start + 1), kernels=[SimpleNamespace(name=k, duration=d) for k, d in kernels], cpu_parent=parent)


def _gpu(name: str, start: float, duration: float):
    return SimpleNamespace(name=name, device_type=DeviceType.CUDA, is_user_annotation=False,
                           time_range=SimpleNamespace(start=start, end=start + duration), kernels=[], cpu_parent=None)


def test_a_kernel_listed_on_many_ops_is_attributed_as_often_as_it_ran():
    # the profiler listed each of a foreach op's multi_tensor_apply launches on every one of its ops (a Llama-7B
    # AdamW step: 379638 attributed for 2576 work items on an H100); here 3 launches listed on each of 3 ops
    launches = [("multi_tensor_apply_kernel<add>", 30.0)] * 3
    ops = [_cpu("aten::_foreach_add_", t, launches) for t in (0.0, 10.0, 20.0)]
    device = [_gpu("multi_tensor_apply_kernel<add>", 100.0 + 40 * i, 30.0) for i in range(3)]
    kernels, total = attribute([*ops, *device])
    assert total == 3
    assert len(kernels) == 3
    assert {k.op for k in kernels} == {"_foreach_add_"}


def test_each_op_keeps_its_own_kernels():
    mm = _cpu("aten::mm", 0.0, [("gemm", 12.0)])
    add = _cpu("aten::add", 5.0, [("elementwise", 2.0), ("elementwise", 2.0)])
    device = [_gpu("gemm", 50.0, 12.0), _gpu("elementwise", 70.0, 2.0), _gpu("elementwise", 75.0, 2.0)]
    kernels, total = attribute([mm, add, *device])
    assert total == 3
    assert [(k.op, k.name) for k in kernels] == [("mm", "gemm"), ("add", "elementwise"), ("add", "elementwise")]
