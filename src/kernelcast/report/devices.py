"""`kernelcast devices`: the GPUs kernelcast knows, how each one's kernel times are known, and the GPU-to-GPU
links, as rich tables that fit the output's width (columns dropped by priority, never a cell split mid-word)."""

from __future__ import annotations

import re
import textwrap


def print_devices(console, labels: dict[str, str], interconnects: bool = False) -> None:
    """Print the GPU table (or, with `interconnects`, the link table) to a rich Console, fitted to its width; where
    the aliases column is dropped for the width, the aliases follow one entry a line; then the GPU legend.
    labels: {GPU id: how its kernel times are known} (predict.kernel_model_label: report formats, predict knows)."""
    from kernelcast.devices import all_gpus
    from kernelcast.devices.interconnects import all_interconnects
    from kernelcast.report import wrap_lines

    if interconnects:
        table, entries, flag = interconnects_table(console.width), all_interconnects(), "--interconnect"
    else:
        table, entries, flag = gpus_table(labels, console.width), all_gpus(), "--gpu"
    console.print(table)
    if "aliases" not in [c.header for c in table.columns]:  # dropped for the width: one entry a line, wrapped
        # a no-break space inside an alias keeps "nvidia h100 80gb hbm3" on one line
        lines = [textwrap.fill(f"{e.id}: {', '.join(a.replace(' ', NBSP) for a in e.aliases)}", console.width,
                               initial_indent="  ", subsequent_indent="      ", break_long_words=False)
                 for e in entries.values() if e.aliases]
        console.print("\n".join([f"aliases (any of them works as {flag}):", *lines]), markup=False)
    if not interconnects:
        console.print(wrap_lines(DEVICES_LEGEND, console.width), markup=False)


NBSP = "\u00a0"
DEVICES_LEGEND = ("kernel times: calibrated = measured on this GPU (its own profile); fitted = the H200's profile "
                  "carried over by datasheet ratios and factors of this GPU's own, fitted to KernelBench's timings "
                  "on it (the published ones, torch 2.5; for the H100 also our own runs with torch 2.11, which a "
                  "capture with a current torch takes); arch (\"its architecture's fitted rates\") "
                  "= the same with its architecture's factors (no timings of its own); unvalidated = "
                  "another vendor's GPU. Held-out error (in parentheses where the column is narrow): the median error "
                  "of one call's time over KernelBench's GPU-busy programs, held out (fitted: each program left out "
                  "of its own fit; arch: each GPU of the architecture predicted from the others'), from "
                  "scripts/fit/fit_gpu_rates.py; none shown: not measured. GPU-to-GPU links: `kernelcast devices "
                  "--interconnects`.")
# `kernelcast devices` columns, dropped from the last while the table is wider than the output (the id, the
# model's source and the peaks stay); below WIDE_DEVICES_FROM the model's source reads in a word or two.
DEVICE_COLUMNS = ("id", "kernel times", "bf16 TF/s", "fp32 TF/s", "TB/s", "SMs", "mem GB", "name", "L2 MB",
                  "ridge bf16", "aliases")
DEVICE_COLUMNS_MIN = 6
WIDE_DEVICES_FROM = 150


def short_model_label(label: str) -> str:
    """kernel_model_label in a word or two: "calibrated", "fitted (12%)", "arch (25%)", "unvalidated",
    "datasheet"."""
    held = re.search(r"held-out error (\d+%)", label)
    tail = f" ({held.group(1)})" if held else ""
    if "rates fitted" in label:
        return "fitted" + tail
    if "architecture" in label:
        return "arch" + tail
    return "unvalidated" if "unvalidated" in label else label.split(";")[0]


def gpus_table(labels: dict[str, str], width: int = 10_000):
    """The GPU table at most `width` columns wide: DEVICE_COLUMNS, dropped from the last down to
    DEVICE_COLUMNS_MIN; below WIDE_DEVICES_FROM the kernel-time source in a word or two."""
    from kernelcast.devices import all_gpus

    rows = []
    for gpu in all_gpus().values():
        bf16 = gpu.matmul_peak("bfloat16", False)[0]  # the roof bf16 GEMMs meet (CUDA cores without bf16 tensor cores)
        label = labels[gpu.id]
        if width >= WIDE_DEVICES_FROM:
            model = label + ("" if gpu.vendor == "nvidia" else f"; {gpu.vendor.upper()}: CUDA kernels")
        else:
            model = short_model_label(label) + ("" if gpu.vendor == "nvidia" else f" ({gpu.vendor.upper()})")
        rows.append({"id": gpu.id, "name": gpu.name, "kernel times": model,
                     "bf16 TF/s": f"{bf16 / 1e12:.0f}" if bf16 else "-",
                     "fp32 TF/s": f"{gpu.peak_flops['fp32'] / 1e12:.1f}",
                     "TB/s": f"{gpu.mem_bw_bytes_per_s / 1e12:.2f}",
                     "L2 MB": f"{gpu.l2_bytes / 1e6:.0f}", "SMs": str(gpu.sm_count),
                     "mem GB": f"{gpu.memory_bytes / 1e9:.0f}",
                     "ridge bf16": f"{bf16 / gpu.mem_bw_bytes_per_s:.0f} FLOP/B" if bf16 else "-",
                     "aliases": ", ".join(gpu.aliases)})
    return _fitted_table("GPUs kernelcast knows (datasheet peaks: gpus.toml)", rows, DEVICE_COLUMNS,
                         DEVICE_COLUMNS_MIN, width, left=("id", "name", "kernel times", "aliases"),
                         wraps=("name", "aliases", "kernel times"))


# `kernelcast devices --interconnects` columns, dropped from the last while the table is wider than the output
LINK_COLUMNS = ("id", "GB/s per direction", "bus efficiency", "default for", "NCCL class", "name", "aliases")
LINK_COLUMNS_MIN = 4


def interconnects_table(width: int = 10_000):
    """The GPU-to-GPU link table at most `width` columns wide: LINK_COLUMNS, dropped from the last down to
    LINK_COLUMNS_MIN."""
    from kernelcast.devices import all_gpus
    from kernelcast.devices.interconnects import all_interconnects, natural_interconnect
    from kernelcast.errors import UnknownInterconnectError

    natural_for: dict[str, list[str]] = {}  # link id -> GPUs whose collectives use it when no --interconnect
    for gpu in all_gpus().values():
        try:
            natural_for.setdefault(natural_interconnect(gpu).id, []).append(gpu.id)
        except UnknownInterconnectError:  # no link data (e.g. an AMD part): --interconnect is required
            pass
    rows = [{"id": link.id, "name": link.name, "GB/s per direction": f"{link.bw_bytes_per_s / 1e9:.0f}",
             "bus efficiency": f"{link.bus_efficiency:.0%} ({link.efficiency_source})", "NCCL class": link.nccl_hw,
             "default for": ", ".join(natural_for.get(link.id, ())) or "-", "aliases": ", ".join(link.aliases)}
            for link in all_interconnects().values()]
    return _fitted_table("GPU-to-GPU links for --interconnect (datasheet bandwidths; see interconnects.toml)", rows,
                         LINK_COLUMNS, LINK_COLUMNS_MIN, width, left=("id", "name", "default for", "NCCL class",
                                                                       "aliases"),
                         wraps=("name", "aliases", "default for", "bus efficiency"))


def _fitted_table(title: str, rows: list[dict], columns: tuple, min_columns: int, width: int, left: tuple,
                  wraps: tuple):
    """A rich Table of `rows` under `columns`, the last dropped while it measures wider than `width` (never fewer
    than min_columns). Cells in `wraps` wrap between words; every other cell stays on one line."""
    from rich.table import Table

    from . import natural_width

    def table(cols):
        t = Table(title=title, title_justify="left")
        for col in cols:
            t.add_column(col, justify="left" if col in left else "right",
                         overflow="fold" if col in wraps else "ellipsis", no_wrap=col not in wraps)
        for row in rows:
            t.add_row(*(row[c] for c in cols))
        return t

    kept = list(columns)
    while len(kept) > min_columns and natural_width(table(kept)) > width:
        kept.pop()
    return table(kept)
