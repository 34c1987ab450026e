"""A small prediction record written by hand (no capture, no torch), for the report stage's tests.

Six ops on an H100's datasheet roofs; the spans are what the simulator gives for them (times in µs):

    op  what                       host  GPU  stream  CPU span          GPU span
    0   mm (bf16, 1024^3)           8     5    0       0 -> 8            8 -> 13
    1   mm, identical to op 0       8     5    0       8 -> 16           16 -> 21
    2   add (fp32, 2^20 elements)   8     3    0       16 -> 24          24 -> 27
    3   copy_ (no FLOPs)            8     2    0       24 -> 32          32 -> 34
    4   .item(): sync               5     2    0       32 -> 39 (waits 2: GPU done at 39)  37 -> 39
    5   add on a side stream        8     4    1       39 -> 47          47 -> 51

First step 51 µs (the GPU ends last), host timer without synchronize 47 µs, GPU time 5+5+3+2+2+4 = 21 µs.
"""

from kernelcast.records import GPUSpec, OpSpan, PredictedOp, PredictionRecord, SyncPointGroup

H100 = GPUSpec(peak_flops={"fp64": 33.5e12, "fp32": 66.9e12, "tf32_tensor": 494.7e12, "bf16_tensor": 989.4e12,
                           "fp16_tensor": 989.4e12, "fp8_tensor": 1978.9e12},
               mem_bw_bytes_per_s=3.35e12, memory_bytes=80e9)
MM_FLOPS = 2 * 1024 ** 3  # 2 * M * N * K
MM_BYTES = 3 * 1024 * 1024 * 2  # A, B read and C written once, bf16
ADD_FLOPS = 2 ** 20
ADD_BYTES = 3 * 2 ** 20 * 4


def _op(index, op, flops, bytes_, time_us, bound, roof, host_us, python_us=0.0, sync=None, source="train.py:10 in step"):
    return PredictedOp(index=index, op=op, phase="forward", module="Net.layers.0", source=source, flops=flops,
                       bytes=bytes_, intensity=flops / bytes_ if bytes_ else 0.0, kernels=1, time_us=time_us,
                       bound=bound, roof=roof, host_us=host_us, python_us=python_us, sync=sync)


def small_record(**changes) -> PredictionRecord:
    ops = (
        _op(0, "aten.mm.default", MM_FLOPS, MM_BYTES, 5.0, "compute", "bf16_tensor", 8.0, python_us=2.0),
        _op(1, "aten.mm.default", MM_FLOPS, MM_BYTES, 5.0, "compute", "bf16_tensor", 8.0),
        _op(2, "aten.add.Tensor", ADD_FLOPS, ADD_BYTES, 3.0, "memory", "fp32", 8.0),
        _op(3, "aten.copy_.default", 0.0, 4e6, 2.0, "memory", "fp32", 8.0),
        _op(4, "aten._local_scalar_dense.default", 0.0, 4.0, 2.0, "latency", "fp32", 5.0, sync="item",
            source="train.py:12 in step"),
        _op(5, "aten.add.Tensor", ADD_FLOPS, ADD_BYTES, 4.0, "memory", "fp32", 8.0, source="train.py:14 in step"),
    )
    spans = (OpSpan(0, 8, 8, 13), OpSpan(8, 16, 16, 21), OpSpan(16, 24, 24, 27), OpSpan(24, 32, 32, 34),
             OpSpan(32, 39, 37, 39, 0, 2.0), OpSpan(39, 47, 47, 51, 1))
    fields = dict(
        gpu="h100-sxm", gpu_name="NVIDIA H100 SXM5 80GB", kernel_model="datasheet", host="a test CPU",
        step_time_us=51.0, first_step_us=51.0, naive_host_timer_us=47.0, gpu_time_us=21.0, host_time_us=45.0,
        kernels=6, bound="host", gpu_idle_fraction=1 - 21 / 51, sync_points=1, ops=ops, uncosted=("aten.foo.default",),
        notes=("a note the report must show",), python_time_us=2.0, launch_bound_ops=4,
        step_time_by_host_speed=((0.5, 30.0), (2.0, 95.0)),
        sync_groups=(SyncPointGroup("train.py:12 in step", "item", 1, 2.0, 2.0, "read it every N steps"),),
        workload="train.py:build", gpu_spec=H100, spans=spans)
    fields.update(changes)
    return PredictionRecord(**fields)
