"""Reflection and replication padding (aten/src/ATen/native/cuda/ReflectionPad.cu, ReplicationPadding.cu).

Forward: one kernel writes the padded output, reading each input element (some twice at the borders: the
count reads the input once). Backward: the input gradient is zero-filled (`grad_input.zero_()`), then one kernel
accumulates the padded gradient into it: two work items. Measured (H200, torch 2.11, zoo
audio_spectrogram_forward): reflection_pad1d, one kernel.
"""

from __future__ import annotations

import dataclasses

from kernelcast.records import OpRecord

from .common import memory_op
from .registry import Cost, CostContext, register

PAD_KERNELS = 1
PAD_BACKWARD_KERNELS = 2  # zero_ + the accumulate kernel


@register("aten.reflection_pad1d", "aten.reflection_pad2d", "aten.reflection_pad3d",
          "aten.replication_pad1d", "aten.replication_pad2d", "aten.replication_pad3d")
def pad(op: OpRecord, ctx: CostContext) -> Cost:
    return memory_op(op, kernels=PAD_KERNELS, kind="copy")


@register("aten.reflection_pad1d_backward", "aten.reflection_pad2d_backward", "aten.reflection_pad3d_backward",
          "aten.replication_pad1d_backward", "aten.replication_pad2d_backward",
          "aten.replication_pad3d_backward")
def pad_backward(op: OpRecord, ctx: CostContext) -> Cost:
    """The zero fill writes the input gradient once more."""
    base = memory_op(op, kernels=PAD_BACKWARD_KERNELS, kind="copy")
    return dataclasses.replace(base, bytes_written=2 * base.bytes_written)
