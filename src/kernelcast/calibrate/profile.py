"""Build a device profile from microbenchmark results.

Every case carries the op records of its call, so each is costed by the same registry the predictor uses: the
profile stores, per shape or per size, the measured time and the number of GPU work items, keyed exactly as
costs/ keys the op (Cost.kind, Cost.key). Nothing here is fitted to a workload.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from kernelcast.costs import DEFAULT_CONTEXT, Cost, cost_of
from kernelcast.costs.launch_table import conv_shape
from kernelcast.costs.linalg import SOLVER_KEY
from kernelcast.costs.losses import NLL_WALK_KEY
from kernelcast.costs.matmul import CONV_KEY_FIELDS
from kernelcast.devices import get_gpu
from kernelcast.predict.calibrated import BLOCK_SECTIONS
from kernelcast.profiles import PROFILE_FORMAT
from kernelcast.records import OpRecord
from . import grouped_gemm, norm_blocks, sparse_fit, spatial_rates, unit_rates, value_index, window_rates
from .generated import grid_fits
from .launch_model import fit_conv_model, fit_gemm_model, per_group_items

MEMORY_KINDS = {"pointwise", "pointwise_transpose", "pointwise_cast", "pointwise_strided", "copy_cast", "reduction", "reduction_outer", "reduction_all", "softmax", "softmax_backward",
                "norm", "norm_backward", "batch_norm", "batch_norm_backward", "batch_norm_channels_last",
                "batch_norm_backward_channels_last", "loss", "copy", "copy_transpose",
                "copy_permute", "rms_norm", "rms_norm_backward", "norm_unvectorized",
                "fill", "embedding_backward", "foreach", "memcpy", "gather", "embedding_bag", "coalesce", "scatter", "sort", "scan", "select", "group_norm",
                "group_norm_backward", "cudnn_batch_norm", "cudnn_batch_norm_channels_last",
                "cudnn_batch_norm_backward", "cudnn_batch_norm_backward_channels_last", "batch_norm_eval", "batch_norm_eval_channels_last",
                "cat_strided"} | {
    f"{pool}{suffix}" for pool in ("max_pool", "avg_pool", "adaptive_avg_pool", "max_pool_backward",
                                   "avg_pool_backward", "adaptive_avg_pool_backward")
    for suffix in ("", "_channels_last")}


def _costs(case: dict) -> list[tuple[OpRecord, Cost]]:
    ops = [OpRecord.from_json(o) for o in case.get("ops", ())]
    out = []
    for op in ops:
        cost = cost_of(op, DEFAULT_CONTEXT)
        if cost is not None and cost.kernels:
            out.append((op, cost))
    return out


def _main(costs: list[tuple[OpRecord, Cost]], kinds: set[str]) -> Cost | None:
    """The op a case measures: the one of the wanted kinds with the most work."""
    chosen = [c for _, c in costs if c.kind in kinds]
    return max(chosen, key=lambda c: (c.flops, c.bytes)) if chosen else None


def _attention_params(case: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in case.items() if k in SWEEP_ATTENTION_PARAMS))


def _sweep_rows(sweep: list[dict]) -> tuple[list, list, list]:
    """GEMM, conv and attention rows ([*cost key, work items, time_us, FLOPs]) from calibrate --sweep cases.

    Work items are the kernels, memsets and memcpys one profiled call launched. An attention backward case
    times a forward and its backward together; the forward case with the same parameters is taken out. Where a
    case of the same parameters was timed by its backward kernels alone (pass "backward_kernels",
    scripts/device/probe_attention_backward.py), that one is used: at small shapes the events measured the host (every
    sweep backward took 90-670 µs, up to 61x its forward). A forward row is its kernels' durations where the case
    recorded them: around a decode call of 4 µs of kernels (one query, 128 keys) the events read 6-475 µs, the host
    and not the GPU, and the profile priced greedy generate()'s decode attention at 27.7 µs a call against 3.1
    measured (zoo gpt2_generate_greedy)."""
    gemm, conv, attention = [], [], []
    forward_us: dict[tuple, float] = {}
    kernel_timed = {_attention_params(c) for c in sweep if c.get("pass") == "backward_kernels" and "time_us" in c}
    for case in sweep:
        if "error" in case or not case.get("ops") or "time_us" not in case:
            continue
        costs = _costs(case)
        items, time_us = len(case.get("kernels", ())), case["time_us"]
        if case["kind"] in ("gemm", "bmm"):
            cost = _main(costs, {"gemm"})
            if cost is not None and cost.key:
                key = list(cost.key)
                if case.get("dtype") == "tf32":
                    key[0] = "tf32"
                gemm.append([*key, items, _kernel_us(case), cost.flops])
        elif case["kind"] == "conv":
            cost = _main(costs, {"conv"})
            if cost is not None and cost.key:
                conv.append([*cost.key, items, _kernel_us(case), cost.flops])
        elif case["kind"] == "attention":
            params = _attention_params(case)
            if case["pass"] == "backward_kernels":  # timed by its kernels' durations (probe_attention_backward.py)
                backward = [c for _, c in costs if c.kind == "attention" and c.key[1] == "bwd"]
                if backward:
                    attention.append([*backward[0].key, items, time_us, backward[0].flops])
            elif case["pass"] == "backward" and params in kernel_timed:
                continue  # events around forward + backward, less the forward: host-bound at small shapes
            elif case["pass"] == "forward":
                forward_us[params] = time_us  # events, as the backward case's events that it is taken from
                cost = _main(costs, {"attention"})
                if cost is not None:  # the kernels' durations, as for GEMMs and convolutions (_kernel_us)
                    attention.append([*cost.key, items, _kernel_us(case), cost.flops])
            else:
                backward = [c for _, c in costs if c.kind == "attention" and c.key[1] == "bwd"]
                fwd = forward_us.get(params)
                if backward and fwd is not None and time_us > fwd:
                    attention.append([*backward[0].key, items, round(time_us - fwd, 3), backward[0].flops])
    return gemm, conv, attention


def _kernel_us(case: dict) -> float:
    """A sweep case's GPU time: its kernels' durations summed (one profiled call), where they were recorded; else
    the events around it. GPU time per step is the kernels' sum (docs/zoo.md), and the events around a pass of
    several kernels (cuDNN's layout transposes, memsets, split reductions) also hold the launch gaps between them,
    which the timeline prices as host time: against the kernels' sums, the event-timed conv table priced the
    second conv draw (2700 passes) 18% over at the median for dense convolutions."""
    kernels = case.get("kernels")
    return round(sum(t for _, t in kernels), 3) if kernels else case["time_us"]


def _conv_kind(row: list) -> tuple:
    """What a conv time row's kernels depend on beyond sizes: pass, dtype, layout, and conv_shape's kind (dims,
    kernel, stride, transposed, depthwise, backend)."""
    return (*row[:3], *conv_shape(tuple(row[:CONV_KEY_FIELDS]))[1])


def _uncovered(drawn: list, designed: list) -> list:
    """The drawn conv time rows of kinds the designed sweep has no row of (patch embeddings, 1-D kernels to 128,
    groups other than 32): they fill its gaps without becoming the nearest points of the shapes it covers, where
    odd drawn sizes ran other cuDNN engines than the round ones models use. Summed |predicted - measured| of
    the zoo's per-workload conv and conv-backward time: 4297 us with every drawn row in the table, 3111 with
    none, 3485 with these (ViT's 16x16 patch embedding: -67% without them, -6% with them)."""
    covered = {_conv_kind(r) for r in designed}
    return [r for r in drawn if _conv_kind(r) not in covered]


def _conv_launch_rows(sweep: list[dict], cases: list[dict]) -> list[list]:
    """Conv launch rows [*conv_key, work items, per-group items] of the sweep's conv cases and the microbenchmarks'
    single-pass ones, from the names of the kernels each launched (launch_model.per_group_items)."""
    rows = []
    for case in sweep:
        if case.get("kind") == "conv" and "error" not in case and case.get("ops") and "kernels" in case:
            cost = _main(_costs(case), {"conv"})
            if cost is not None and cost.key:
                names = [name for name, _ in case["kernels"]]
                rows.append([*cost.key, len(names), per_group_items(cost.key, names)])
    for case in cases:
        if case["kind"].startswith("conv_") and "items" in case:
            cost = _main(_costs(case), {"conv"})
            if cost is not None and cost.key and cost.key[0] != "conv_bwd":
                rows.append([*cost.key, case["n_items"], per_group_items(cost.key, case["items"])])
    return rows


SWEEP_ATTENTION_PARAMS = ("backend", "batch", "heads", "kv_heads", "sq", "sk", "d", "causal", "mask", "dropout",
                          "dtype")


# Cases measured but left out of the curves: two contiguous parts concatenated (row_grid) ran far faster than the
# cats models run (RoPE's strided halves, KV-cache growth): as a curve of their own they priced the zoo's cats at
# -57% of measured, where the copy curve gives -33%; in the copy curve they would move every copy.
# torch.linalg's decompositions (section linalg_grid) make the linalg table (_linalg_rows), not the memory curves:
# their copies and fills would join the copy and fill curves with the solver's time on them.
LINALG_CASE_KINDS = {"linalg_solve", "linalg_lu_factor", "linalg_cholesky", "linalg_inv", "linalg_solve_triangular",
                     "linalg_qr", "linalg_eigh", "linalg_svd"}
# RMS norm's forward and backward timed together (section extras): the whole time would sit on the backward's
# row of the curve (zoo layernorm_odd_widths' 2040-wide fp32 backward priced 81 us, measured 56); norm_width_grid
# times the backward alone.
# (the small-index and nll_loss cases have lines of their own, calibrate/unit_rates.py: their times are a thread's
# walk over indices or frames, which the curves by bytes must not take in; the gather curve had priced zoo
# dlrm_forward_mean's 2-index aten.index 3.6 -> 9.6 µs, 4.4 measured)
UNUSED_CASE_KINDS = {"cat_dim0", "cat_dim1", "rms_norm_fwd_bwd", *norm_blocks.BN_WARM_KINDS, *LINALG_CASE_KINDS,
                     *unit_rates.SMALL_INDEX_CASE_KINDS, *unit_rates.SMALL_INDEX_ADD_CASE_KINDS,
                     *unit_rates.SMALL_INDEX_ADD_CHECK_KINDS, *unit_rates.NLL_CASE_KINDS}


def _linalg_rows(cases: list[dict]) -> dict[str, list[list]]:
    """Per aten op, [n, matrices, µs] of the torch.linalg calls measured (section linalg_grid): each call's
    kernels summed, keyed as its cost is (costs/linalg.py solver_key)."""
    rows: dict[str, list[list]] = defaultdict(list)
    for case in cases:
        if case.get("kind") not in LINALG_CASE_KINDS or "error" in case or not case.get("ops"):
            continue
        cost = cost_of(OpRecord.from_json(case["ops"][0]), DEFAULT_CONTEXT)
        if cost is not None and cost.key[:1] == (SOLVER_KEY,):
            rows[cost.key[1]].append([cost.key[2], cost.key[3], round(case["device_us"], 3)])
    return {op: sorted(r) for op, r in sorted(rows.items())}


def build_profile(raw: dict, gpu: str, launch_sweep: list[dict] = (), time_sweep: list[dict] = ()) -> dict:
    """The profile of a calibration run. launch_sweep: more sweep cases (scripts/device/probe_gemm_launches.py,
    scripts/device/probe_conv_launches.py) whose GEMMs and convolutions join the launch counts and their classifiers;
    of the time tables, only convolutions of kinds the designed sweep lacks (_uncovered). IDW over the time
    tables priced the zoo's GEMMs worse with the log-uniform GEMMs in them (median per-op error 13.8% -> 19.8%;
    odd sizes run slower tiles than the round ones models use, and became the nearest points of round shapes).
    time_sweep: sweep cases whose rows join the time tables only, not the launch counts (the wide draw of 3-D
    convolutions: in the conv launch classifier it moved zoo wav2vec2_train's kernels from 502 to 446 of 503)."""
    cases = [c for c in raw["cases"] if "error" not in c and c.get("ops") and c["kind"] not in UNUSED_CASE_KINDS]
    gemm, conv, attention = _sweep_rows([*raw.get("sweep", ()), *time_sweep])
    launch_only_gemm, drawn_conv, _ = _sweep_rows(list(launch_sweep))
    conv += _uncovered(drawn_conv, conv)
    memory: dict[str, list] = defaultdict(list)
    forward_time: dict[tuple, float] = {}
    warm_time: dict[int, float] = {}
    cold: dict[int, tuple[float, float]] = {}
    floors = []
    windows: list[tuple[Cost, float, int]] = []  # (cost, µs, work items) of lone windowed pooling ops
    spatial: list[tuple[Cost, float]] = []  # (cost, µs) of the grid's lone spatial softmax ops
    for case in cases:
        costs = _costs(case)
        kind, time_us, items = case["kind"], case["device_us"], case["n_items"]
        if kind.startswith(("mm_", "addmm_", "bmm")) or kind == "mm_fp8":
            cost = _main(costs, {"gemm"})
            if cost is not None and cost.key:
                key = list(cost.key)
                if kind == "mm_tf32":  # fp32 inputs on the TF32 tensor cores: a roof of their own
                    key[0] = "tf32"
                gemm.append([*key, items, round(time_us, 3), cost.flops])
        elif kind.startswith("conv_"):
            cost = _main(costs, {"conv"})
            # a forward, or a backward that asked for one gradient: the sweep's passes; a backward with both
            # is two lookups, so it is not a row of its own
            if cost is not None and cost.key and cost.key[0] != "conv_bwd":
                conv.append([*cost.key, items, round(time_us, 3), cost.flops])
        elif kind == "sdpa_fwd":
            cost = _main(costs, {"attention"})
            if cost is not None:
                forward_time[cost.key[0:1] + cost.key[2:]] = time_us
                attention.append([*cost.key, items, round(time_us, 3), cost.flops])
        elif kind == "sdpa_fwd_bwd":
            backward = [c for _, c in costs if c.kind == "attention" and c.key[1] == "bwd"]
            fwd = forward_time.get(backward[0].key[0:1] + backward[0].key[2:]) if backward else None
            if backward and fwd is not None and time_us > fwd:
                attention.append([*backward[0].key, items, round(time_us - fwd, 3), backward[0].flops])
        elif kind.endswith("_l2_warm"):
            warm_time[case["bytes_per_tensor"]] = time_us
            continue
        elif len(costs) == 1 and spatial_rates.is_spatial(costs[0][1]) and kind.startswith("softmax_spatial"):
            spatial.append((costs[0][1], time_us))  # the geometry fit's point, not on a byte curve
            continue
        elif len(costs) == 1 and window_rates.is_window(costs[0][1]):
            # a window fit's point; on its byte curve only if its op gets no window fit (after the loop)
            windows.append((costs[0][1], time_us, items))
        else:
            cost = _main(costs, MEMORY_KINDS)
            if cost is not None and cost.key[:1] == (NLL_WALK_KEY,):
                # nll_loss's one-block walk: its time follows the frames a thread walks (unit_rates' nll_walk
                # line), not bytes; on the loss curve it had priced every loss kind by the nll walk's times
                continue
            if kind == "add_fp32":
                cold[case["bytes_per_tensor"]] = (sum(c.bytes for _, c in costs), time_us)
            if cost is not None:
                total_bytes = sum(c.bytes for _, c in costs if c.kind in MEMORY_KINDS)
                inner, itemsize = cost.key if len(cost.key) == 2 else (1, 4)
                memory[cost.kind].append([total_bytes, items, round(time_us, 3), inner, itemsize])
                if items == 1:
                    floors.append(time_us)
    pool_windows = window_rates.fit([(cost, time_us) for cost, time_us, _ in windows])
    for cost, time_us, items in windows:
        if cost.key[1] not in pool_windows and cost.kind in MEMORY_KINDS:
            memory[cost.kind].append([cost.bytes, items, round(time_us, 3), *cost.key[-2:]])
    linalg = _linalg_rows(raw["cases"])
    meta = raw["meta"]
    gemm_launches = [row[:-2] for row in gemm + launch_only_gemm]
    gemm_model = fit_gemm_model(gemm_launches)
    conv_launches = _conv_launch_rows([*raw.get("sweep", ()), *launch_sweep], cases)
    conv_model = fit_conv_model(conv_launches)
    profile = {
        "format": PROFILE_FORMAT, "gpu": gpu, "device_name": meta["device"], "driver": meta.get("driver", ""),
        "torch": meta["torch"], "cuda": meta["cuda"], "cudnn": meta["cudnn"], "date": meta["date"],
        "command": meta["command"],
        "launches": {
            "source": meta["command"],
            "gemm_columns": ["dtype", "a_transposed", "b_transposed", "bias", "M", "N", "K", "work_items"],
            "gemm": gemm_launches,
            # the launch-count classifier over `gemm` (calibrate/launch_model.py); absent without scikit-learn
            **({"gemm_model": gemm_model} if gemm_model else {}),
            "conv_columns": ["pass", "dtype", "channels_last", "c_in", "c_out", "kernel", "stride", "size",
                             "groups", "batch", "dims", "transposed", "work_items", "per_group_items"],
            "conv": conv_launches,
            **({"conv_model": conv_model} if conv_model else {}),
        },
        "timings": {
            # each row: the op's cost key, then work items, time_us, FLOPs
            "gemm": gemm,  # (dtype, a transposed, b transposed, bias, M, N, K)
            "conv": conv,  # costs.matmul.conv_key
            "attention": attention,  # (backend, pass, B*H, Sq, Sk, head dim, causal)
            # per kind: [bytes moved, work items, time_us, innermost dim, item size]
            "memory": {kind: sorted(points) for kind, points in memory.items()},
            "work_item_floor_us": round(statistics.median(sorted(floors)[:5]), 3) if floors else 1.0,
            # [bytes moved, cold time / warm time] of the same add with inputs flushed from L2 or left in it
            "l2_speedup": [[cold[b][0], round(cold[b][1] / warm_time[b], 3)] for b in sorted(cold) if b in warm_time],
        },
        "host": raw.get("host", {}),  # CPU µs per eager op on the machine that calibrated (see calibrate/host.py)
    }
    if linalg:
        profile["timings"]["linalg"] = linalg  # per aten op: [n, matrices, µs] (predict/linalg_time.py)
    if pool_windows:  # NC(D)HW pooling by its window's taps (calibrate/window_rates.py)
        profile["timings"]["pool_windows"] = pool_windows
    gpu_spec = get_gpu(gpu)
    spatial_fits = spatial_rates.fit(spatial, gpu_spec.sm_count, gpu_spec.compute_capability, gpu_spec.l2_bytes)
    if spatial_fits:  # softmax over a dim that is not the last, by its launch geometry (calibrate/spatial_rates.py)
        profile["timings"]["spatial_softmax"] = spatial_fits
    measured = [c for c in raw["cases"] if "error" not in c]  # the unit and block fits use the L2-resident cases too
    rates = unit_rates.fit(measured, gpu_spec.sm_count)
    if rates:  # row gathers and index_add_: a time per unit as well as the bytes (calibrate/unit_rates.py)
        profile["timings"]["unit_rates"] = rates
    sm_count = get_gpu(gpu).sm_count
    for pass_, section in (("forward", "batch_norm_blocks"), ("backward", "batch_norm_backward_blocks")):
        blocks = norm_blocks.fit(measured, sm_count, pass_)
        if blocks:  # NCHW batch norm in training: one block per channel (calibrate/norm_blocks.py)
            profile["timings"][section] = blocks
    sparse = sparse_fit.fit(measured)
    if sparse:  # coalesce and the EmbeddingBag forward (calibrate/sparse_fit.py)
        profile["timings"]["sparse"] = sparse
    grouped = grouped_gemm.fit(measured)
    if grouped:  # torch._grouped_mm's CUTLASS path (calibrate/grouped_gemm.py)
        profile["timings"]["grouped_gemm"] = grouped
    for kind, blocks in norm_blocks.fit_cost_blocks(measured, sm_count).items():
        profile["timings"][BLOCK_SECTIONS[kind]] = blocks  # weight norm, small sorts, top-k
    generated = grid_fits({"cases": measured}, get_gpu(gpu).l2_bytes)
    if generated:  # Inductor's Triton kernels, from the compiled microbenchmarks (calibrate/triton_grid.py)
        profile["timings"]["generated"] = {**generated, "source": "calibrate section triton_grid"}
    index_factors = value_index.fit(profile, [(c, _costs(c)) for c in cases])
    if index_factors:  # max / argmax over a dim: their value-only kind's time times a factor (calibrate/value_index.py)
        profile["timings"]["value_index"] = index_factors
    fitted = _fitted_time_models(profile, gpu)
    if fitted:  # the tree regressors of the kernel-time corrections (calibrate/time_model.py)
        profile["timings"]["fitted"] = fitted
    return profile


def _fitted_time_models(profile: dict, gpu: str) -> dict:
    from kernelcast.predict.calibrated import CalibratedModel
    from kernelcast.records import CaptureSettings

    from .time_model import fit_time_models

    spec = get_gpu(gpu)
    return fit_time_models(CalibratedModel(spec, CaptureSettings(), profile, spec))
