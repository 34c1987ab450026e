"""Inductor's generated Triton kernels, timed on a designed grid of compiled microbenchmarks (needs a GPU).

The calibrate section `triton_grid` compiles small functions with torch.compile (default mode, static shapes)
whose kernels are the classes Inductor generates for real models: pointwise chains (one to four inputs, a
broadcast bias, a per-channel scale of an NCHW or channels_last activation, a transpose), reductions along
the last dimension (sum, softmax, layer norm) and across rows (a column sum, a full sum), and a layer norm's
backward. Sizes are log-spaced from a few KB to hundreds of MB, with the odd row lengths models have (7, 100,
1000, 50257). Each generated kernel is timed on its own (profiler, L2 flushed between calls, the median of
REPEATS) beside Inductor's own byte count for it (`kernel_num_gb`, which `config.benchmark_kernel` makes
its codegen write, the figure the capture costs generated kernels by: costs/generated.py).

One raw row per case: {"kind": "triton_grid", "case", "shape", "dtype", "kernels": [[name, median µs, bytes
or None, all µs], ...], "n_items", "device_us"}. calibrate/generated.py turns them into the profile's
per-class fits. The compiled zoo steps (scripts/device/compile_measure.py) stay out of the fit: they are the check.
`atomic_kernels` / `tiled_kernels`: the case's kernels that store with tl.atomic_add / iterate a 2-D tile.
"""

from __future__ import annotations

import itertools
import statistics
import time
from typing import Callable

import torch
import torch.nn.functional as F

REPEATS = 5
ROW_LENGTHS = (7, 32, 100, 256, 768, 1000, 4096, 16384, 50257, 131072)
ROW_COUNTS = (1, 64, 4096, 65536)
POINTWISE_ELEMENTS = tuple(1 << p for p in range(10, 29, 2))  # 1K to 256M elements
MAX_ELEMENTS = 1 << 27
MIN_ELEMENTS = 1 << 8
LAYOUT_CASES = ((64, 3, 224), (8, 3, 512), (32, 64, 56), (32, 256, 14), (8, 1024, 7), (16, 32, 128))
# The section stops starting cases after this long (each compiles in ~1-3 s on a 16-core host; a device call
# has 10 minutes): the rows it skipped are recorded as such.
BUDGET_S = 330.0


def inductor_kernel_facts() -> dict[int, dict[str, dict]]:
    """What Inductor wrote about every generated kernel loaded so far, by the module that holds it:
    {id(module): {kernel name: {"bytes": its byte count (`kernel_num_gb` in its inductor_meta, written when
    config.benchmark_kernel is on), "atomic": it stores with tl.atomic_add, "tiled": it iterates a 2-D tile
    (a ynumel argument: a transpose or layout change)}}. A kernel name recurs across graphs, so a caller diffs
    modules. Anything unexpected gives an empty answer, never an error (the figures are data, not control)."""
    out: dict[int, dict[str, dict]] = {}
    try:
        from torch._inductor.codecache import PyCodeCache

        modules = getattr(PyCodeCache, "modules", None) or list(getattr(PyCodeCache, "modules_no_attr", {}).values())
        for module in modules:
            for value in list(vars(module).values()):
                meta = getattr(value, "inductor_meta", None)
                if isinstance(meta, dict) and meta.get("kernel_name") and meta.get("kernel_num_gb") is not None:
                    signature = (getattr(value, "triton_meta", None) or {}).get("signature", {})
                    out.setdefault(id(module), {})[meta["kernel_name"]] = {
                        "bytes": round(float(meta["kernel_num_gb"]) * 1e9),
                        "atomic": bool(meta.get("atomic_add_found")), "tiled": "ynumel" in signature}
    except Exception:
        return {}
    return out


# -- the cases: (name, params, inputs builder, function) -------------------------------------------------
def _randn(*shape, dtype=torch.bfloat16, channels_last: bool = False) -> torch.Tensor:
    x = torch.randn(*shape, device="cuda", dtype=dtype)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


def _pointwise_cases(quick: bool):
    sizes = POINTWISE_ELEMENTS[::2] if quick else POINTWISE_ELEMENTS
    for n, dtype in itertools.product(sizes, (torch.float32, torch.bfloat16)):
        yield "scale_shift_relu", (n,), dtype, lambda n=n, d=dtype: (_randn(n, dtype=d),), \
            lambda x: torch.relu(x * 0.5 + 1.0)
        if n <= MAX_ELEMENTS:
            yield "add", (n,), dtype, lambda n=n, d=dtype: (_randn(n, dtype=d), _randn(n, dtype=d)), \
                lambda x, y: x + y
    for n in sizes[1::2]:
        if n <= MAX_ELEMENTS // 2:
            yield "four_inputs", (n,), torch.float32, lambda n=n: tuple(_randn(n, dtype=torch.float32) for _ in range(4)), \
                lambda a, b, c, d: a * b + c * d
    for rows, cols in itertools.product((16, 512, 8192), (768, 3072, 50257)):
        if rows * cols <= MAX_ELEMENTS:
            yield "bias_gelu", (rows, cols), torch.bfloat16, lambda r=rows, c=cols: (_randn(r, c), _randn(c)), \
                lambda x, b: F.gelu(x + b, approximate="tanh")
    for rows, cols in ((1024, 1024), (4096, 4096), (64, 8192), (8192, 64), (1000, 3001)):
        yield "transpose_scale", (rows, cols), torch.bfloat16, lambda r=rows, c=cols: (_randn(r, c),), \
            lambda x: (x.t() * 2.0).contiguous()
    for n, c, hw in LAYOUT_CASES:  # NCHW -> channels_last, as Inductor feeds a conv (a tiled transpose)
        yield "to_channels_last", (n, c, hw, hw), torch.bfloat16, lambda n=n, c=c, hw=hw: (_randn(n, c, hw, hw),), \
            lambda x: (x * 1.0).contiguous(memory_format=torch.channels_last)
    for (n, c, hw), cl in itertools.product(((32, 64, 56), (32, 256, 14), (8, 512, 7), (64, 128, 28)), (False, True)):
        yield "channel_affine_relu" + ("_channels_last" if cl else ""), (n, c, hw, hw), torch.bfloat16, \
            lambda n=n, c=c, hw=hw, cl=cl: (_randn(n, c, hw, hw, channels_last=cl), _randn(c), _randn(c)), \
            lambda x, s, b: torch.relu(x * s[:, None, None] + b[:, None, None])


def _row_shapes(quick: bool):
    for rows, cols in itertools.product(ROW_COUNTS, ROW_LENGTHS[::2] if quick else ROW_LENGTHS):
        if MIN_ELEMENTS <= rows * cols <= MAX_ELEMENTS:
            yield rows, cols


def _reduction_cases(quick: bool):
    for rows, cols in _row_shapes(quick):
        yield "row_sum", (rows, cols), torch.float32, lambda r=rows, c=cols: (_randn(r, c, dtype=torch.float32),), \
            lambda x: x.sum(-1)
        yield "softmax", (rows, cols), torch.bfloat16, lambda r=rows, c=cols: (_randn(r, c),), \
            lambda x: torch.softmax(x.float(), -1).to(x.dtype)
    for rows, cols in itertools.product((64, 2048, 16384), (768, 1000, 4096, 12288)):
        if rows * cols <= MAX_ELEMENTS:
            yield "layer_norm", (rows, cols), torch.bfloat16, \
                lambda r=rows, c=cols: (_randn(r, c), _randn(c), _randn(c)), \
                lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b)
    for rows, cols in itertools.product((64, 4096, 65536), (64, 1024, 8192)):
        if rows * cols <= MAX_ELEMENTS:
            yield "column_sum", (rows, cols), torch.float32, \
                lambda r=rows, c=cols: (_randn(r, c, dtype=torch.float32),), lambda x: x.sum(0)
    for n in (1 << 12, 1 << 18, 1 << 24, 1 << 27):
        yield "full_sum", (n,), torch.float32, lambda n=n: (_randn(n, dtype=torch.float32),), lambda x: x.sum()
    for n, c, hw in ((32, 256, 14), (64, 2048, 7), (8, 64, 56)):
        yield "global_avg_pool_channels_last", (n, c, hw, hw), torch.bfloat16, \
            lambda n=n, c=c, hw=hw: (_randn(n, c, hw, hw, channels_last=True),), lambda x: x.mean((2, 3))


def _layer_norm_train(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, g: torch.Tensor) -> None:
    F.layer_norm(x, (x.shape[-1],), w, b).backward(g)


def _backward_cases(quick: bool):
    for rows, cols in itertools.product((2048, 16384), (768, 4096)):
        yield "layer_norm_train", (rows, cols), torch.bfloat16, \
            lambda r=rows, c=cols: (_randn(r, c).requires_grad_(), _randn(c).requires_grad_(),
                                    _randn(c).requires_grad_(), _randn(r, c)), _layer_norm_train


def _index_add(index: torch.Tensor, source: torch.Tensor, rows: int) -> torch.Tensor:
    return torch.zeros(rows, source.shape[1], device=source.device, dtype=source.dtype).index_add_(0, index, source)


def _embedding_backward(grad: torch.Tensor, index: torch.Tensor, rows: int) -> torch.Tensor:
    return torch.ops.aten.embedding_dense_backward(grad, index, rows, -1, False)


# Atomic scatter-adds as Inductor lowers index_add_ and an embedding's backward (index_put with accumulate:
# one tl.atomic_add per element): (index length, row width, destination rows). A case's shape is
# [index length, row width, destination rows]; its atomic elements are the first two multiplied.
ATOMIC_CASES = ((4096, 64, 1000), (65536, 64, 1000), (65536, 64, 100_000), (500_000, 64, 50_000),
                (500_000, 256, 50_000), (65536, 256, 100_000), (1_000_000, 1, 10_000), (8192, 768, 50_000),
                (65536, 768, 50_000), (16384, 4096, 32_000))


def _atomic_cases(quick: bool):
    for (n, width, rows), dtype in itertools.product(ATOMIC_CASES[::2] if quick else ATOMIC_CASES,
                                                     (torch.float32, torch.bfloat16)):
        if dtype == torch.float32:
            yield "index_add", (n, width, rows), dtype, \
                lambda n=n, w=width, r=rows: (torch.randint(0, r, (n,), device="cuda"),
                                              _randn(n, w, dtype=torch.float32)), \
                lambda index, source, r=rows: _index_add(index, source, r)
        yield "embedding_backward", (n, width, rows), dtype, \
            lambda n=n, w=width, r=rows, d=dtype: (_randn(n, w, dtype=d), torch.randint(0, r, (n,), device="cuda")), \
            lambda grad, index, r=rows: _embedding_backward(grad, index, r)


def grid_cases(quick: bool = False):
    """Every case of the section: (name, shape, dtype, make inputs, function to compile)."""
    yield from _atomic_cases(quick)
    yield from _pointwise_cases(quick)
    yield from _reduction_cases(quick)
    yield from _backward_cases(quick)


# -- running one case ----------------------------------------------------------------------------------------
def _kernel_times(call: Callable[[], object], flush: Callable[[], None]) -> tuple[list[list[str | float]], int]:
    """[[kernel name, median µs, all µs], ...] in launch order and the launches per call, over REPEATS
    profiled calls with the L2 flushed before each."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    flush()  # the first flush allocates its buffer (a fill kernel): before the profile, not in it
    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(REPEATS):
            flush()
            call()
            torch.cuda.synchronize()
    items = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA and "bitwise_not" not in e.name),
                   key=lambda e: e.time_range.start)
    per_call = max(1, len(items) // REPEATS)
    times: list[list[float]] = [[] for _ in range(per_call)]
    names = [e.name for e in items[:per_call]]
    for i, e in enumerate(items[:per_call * REPEATS]):
        times[i % per_call].append(e.time_range.end - e.time_range.start)
    return [[name, round(statistics.median(t), 3), [round(x, 3) for x in t]] for name, t in zip(names, times)], per_call


def run_case(name: str, shape: tuple, dtype: torch.dtype, make: Callable, fn: Callable,
             flush: Callable[[], None]) -> dict:
    """One compiled case's raw row (see the module docstring); an exception is recorded, not raised."""
    row = {"kind": "triton_grid", "case": name, "shape": list(shape), "dtype": str(dtype)[6:]}
    try:
        torch._dynamo.reset()
        inputs = make()
        compiled = torch.compile(fn, dynamic=False)
        seen = set(inductor_kernel_facts())
        t0 = time.perf_counter()
        compiled(*inputs)
        torch.cuda.synchronize()
        row["compile_s"] = round(time.perf_counter() - t0, 2)
        loaded = {k: facts for mid, kernels in inductor_kernel_facts().items() if mid not in seen
                  for k, facts in kernels.items()}
        kernels, per_call = _kernel_times(lambda: compiled(*inputs), flush)
        row["kernels"] = [[k, us, loaded.get(k, {}).get("bytes"), all_us] for k, us, all_us in kernels]
        ran = {k[0] for k in kernels}
        row["atomic_kernels"] = sorted(k for k in ran if loaded.get(k, {}).get("atomic"))
        row["tiled_kernels"] = sorted(k for k in ran if loaded.get(k, {}).get("tiled"))
        row["n_items"] = per_call
        row["device_us"] = round(sum(k[1] for k in kernels), 3)
    except Exception as exc:  # keep sweeping; the failure is data too
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
    return row


def triton_grid(results: list, quick: bool, flush: Callable[[], None]) -> None:
    """The calibrate section: every grid case's row appended to results (Inductor writes its byte counts)."""
    import torch._inductor.config as inductor_config

    before = inductor_config.benchmark_kernel
    inductor_config.benchmark_kernel = True
    deadline = time.perf_counter() + BUDGET_S
    try:
        for name, shape, dtype, make, fn in grid_cases(quick):
            if time.perf_counter() > deadline:
                results.append({"kind": "triton_grid", "case": name, "shape": list(shape), "dtype": str(dtype)[6:],
                                "error": f"skipped: the section's {BUDGET_S:.0f} s budget was spent"})
                continue
            results.append(run_case(name, shape, dtype, make, fn, flush=flush))
            torch.cuda.empty_cache()
    finally:
        inductor_config.benchmark_kernel = before
        torch._dynamo.reset()
