"""The CUDA build's dispatch choices, as data, and the ops it keeps whole that a CPU-only torch decomposes.

`data/cuda_ops_torch<major.minor>.json` lists, for every aten op (name.overload) of a CUDA build, the dispatch
keys it has a kernel for (CUDA, CPU, Meta, CompositeImplicitAutograd, CompositeExplicitAutograd, ...), read off
that build's dispatcher with the command the file names (scripts/device/cuda_op_table.py). The capture reads the
table of the torch it runs under, or the nearest version recorded (and says so in the capture's notes).

Kept whole: an op that has a CUDA kernel in the CUDA build and a CompositeImplicitAutograd formula here, but
no CUDA kernel in this (CPU-only) build, would run the formula on fake CUDA tensors: the dispatcher's
AutogradCUDA entry takes CompositeImplicitAutograd only when the backend has no kernel of its own
(c10/core/impl/OperatorEntry.cpp, computeDispatchTableEntryWithDebug, rule 2.2). nn.RMSNorm then became
pow/mean/add/rsqrt/mul where the GPU runs `_fused_rms_norm` (1 kernel) and `_fused_rms_norm_backward` (2; zoo
layernorm_odd_widths), and SiLU's backward seven ops where it runs one. A stand-in CUDA kernel, registered
for the length of the capture, gives the dispatcher the CUDA build's choice; FakeTensorMode, a Python mode
ahead of the CUDA key, computes the op, so the stand-in never runs: by its Meta kernel (silu_backward), else by
PyTorch's own decomposition in torch._decomp, written to give the fused kernel's outputs (_fused_rms_norm:
contiguous Y in the input's dtype, rstd in the accumulate type), else by the op's implicit formula, whose
TensorIterator ops lay outputs out as the CUDA kernel's TensorIterator does (mish_backward). Each is checked
against the CUDA kernel's outputs in tests/capture/test_cuda_path.py.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Mapping

import torch

from kernelcast.errors import CaptureError

DATA_DIR = Path(__file__).parent / "data"
TABLE_GLOB = "cuda_ops_torch*.json"
TABLE_VERSION = re.compile(r"cuda_ops_torch(\d+)\.(\d+)\.json$")

CUDA = "CUDA"
CPU = "CPU"
IMPLICIT = "CompositeImplicitAutograd"
EXPLICIT = "CompositeExplicitAutograd"
EXPLICIT_NON_FUNCTIONAL = "CompositeExplicitAutogradNonFunctional"


@dataclass(frozen=True)
class CudaOpTable:
    """Dispatch keys with a kernel, per aten op, in one CUDA build of torch."""

    torch_version: str  # of the CUDA build the table was read from, e.g. "2.11.0+cu130"
    command: str  # what made it
    ops: Mapping[str, frozenset[str]]  # "aten::add.Tensor" / "aten::silu_backward" -> {"CUDA", "Meta", ...}
    note: str = ""  # set when the table is not for the running torch's version

    def keys(self, name: str) -> frozenset[str] | None:
        """The op's keys, or None when the CUDA build has no such op (newer than the table)."""
        return self.ops.get(name)

    def has_cuda_kernel(self, name: str) -> bool:
        return CUDA in (self.keys(name) or ())

    def decomposes_below_autograd(self, name: str) -> bool:
        """No CUDA kernel, and an explicit composite one: on CUDA it runs below autograd, calling other ops."""
        keys = self.keys(name)
        return keys is not None and CUDA not in keys and bool(keys & {EXPLICIT, EXPLICIT_NON_FUNCTIONAL})

    def decomposes_above_autograd(self, name: str) -> bool:
        """No CUDA kernel and a CompositeImplicitAutograd formula: the formula runs (above autograd, or
        below it when another op calls this one there)."""
        keys = self.keys(name)
        return keys is not None and CUDA not in keys and IMPLICIT in keys


def _version(text: str) -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", text).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


def recorded_versions(data_dir: Path = DATA_DIR) -> dict[tuple[int, int], Path]:
    found = {}
    for path in data_dir.glob(TABLE_GLOB):
        m = TABLE_VERSION.search(path.name)
        if m:
            found[(int(m.group(1)), int(m.group(2)))] = path
    return found


def nearest_version(want: tuple[int, int], have: list[tuple[int, int]]) -> tuple[int, int]:
    """The recorded version closest to `want` (by minor releases within a major); the newer one on a tie."""
    return min(have, key=lambda v: (abs((v[0] - want[0]) * 100 + v[1] - want[1]), -v[0], -v[1]))


@lru_cache(maxsize=None)
def load_op_table(torch_version: str = torch.__version__, data_dir: Path = DATA_DIR) -> CudaOpTable:
    """The CUDA op table for this torch version, else the nearest recorded one (its `note` says so)."""
    versions = recorded_versions(data_dir)
    if not versions:
        raise CaptureError(
            f"no CUDA op table in {data_dir} (cuda_ops_torch<version>.json): kernelcast needs one to follow the "
            "CUDA build's dispatch; make it on a machine with a CUDA build of torch with "
            "`python3 scripts/device/cuda_op_table.py --out <that folder>/cuda_ops_torch<major.minor>.json`")
    want = _version(torch_version)
    chosen = nearest_version(want, list(versions))
    doc = json.loads(versions[chosen].read_text())
    keys = doc["keys"]
    ops = {name: frozenset(keys[int(i)] for i in indexes) for name, indexes in doc["ops"].items()}
    note = "" if chosen == want else (
        f"CUDA dispatch follows the op table of torch {doc['torch']} (no table for torch "
        f"{want[0]}.{want[1]} is recorded; ops added since then run as this build dispatches them)")
    return CudaOpTable(torch_version=doc["torch"], command=doc.get("command", ""), ops=ops, note=note)


def op_name(func: torch._ops.OpOverload) -> str:
    """The table's name of an overload: "aten::add.Tensor", "aten::silu_backward" for a default overload."""
    return func.name()


def overload_of(name: str) -> torch._ops.OpOverload | None:
    """The overload a table name stands for, or None when this build has no such op."""
    packet, _, overload = name.removeprefix("aten::").partition(".")
    try:
        return getattr(getattr(torch.ops.aten, packet), overload or "default")
    except AttributeError:
        return None


# -- kept whole ------------------------------------------------------------------------------------------
def _has_here(name: str, key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(name, key)


def ops_to_keep_whole(table: CudaOpTable) -> list[str]:
    """Ops with a CUDA kernel in the CUDA build that this build would decompose by their implicit formula."""
    here = set(torch._C._dispatch_get_all_op_names())
    return sorted(name for name, keys in table.ops.items()
                  if CUDA in keys and name in here and _has_here(name, IMPLICIT) and not _has_here(name, CUDA))


def _stand_in(*args, **kwargs):
    raise RuntimeError("kernelcast: a stand-in CUDA kernel ran; fake tensors should never reach it")


@contextlib.contextmanager
def cuda_kernels_kept_whole(table: CudaOpTable) -> Iterator[list[str]]:
    """A stand-in CUDA kernel, for the length of the capture, for each op the CUDA build keeps whole and this
    build would decompose. Yields their names (none on a CUDA build)."""
    names = ops_to_keep_whole(table)
    if not names:
        yield names
        return
    lib = torch.library.Library("aten", "IMPL")
    try:
        for name in names:
            lib.impl(name.removeprefix("aten::"), _stand_in, CUDA)
        yield names
    finally:
        lib._destroy()
