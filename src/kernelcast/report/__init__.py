"""Stage 4: tables for the terminal and JSON for tools."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from kernelcast.predict import OpPrediction, Prediction

DEFAULT_TOP = 15
_LAYER_INDEX = re.compile(r"\.\d+(?=\.|$)")


def module_pattern(module: str) -> str:
    """"GPT2LMHeadModel.transformer.h.3.attn" -> "GPT2LMHeadModel.transformer.h.*.attn"."""
    return _LAYER_INDEX.sub(".*", module)


@dataclass(frozen=True)
class OpGroup:
    """Ops of one kind issued from one source line (e.g. the attention matmul of every layer)."""

    op: str
    phase: str
    module: str
    source: str
    count: int
    flops: float
    bytes: float
    kernels: int
    time_us: float
    bound: str

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0


def group_ops(ops: tuple[OpPrediction, ...]) -> list[OpGroup]:
    buckets: dict[tuple, list[OpPrediction]] = defaultdict(list)
    for p in ops:
        buckets[(p.op, p.phase, module_pattern(p.module), p.source)].append(p)
    groups = []
    for (op, phase, module, source), members in buckets.items():
        bound_time: Counter = Counter()
        for m in members:
            bound_time[m.bound] += m.time_us or 1e-9
        groups.append(OpGroup(
            op=op, phase=phase, module=module, source=source, count=len(members),
            flops=sum(m.flops for m in members), bytes=sum(m.bytes for m in members),
            kernels=sum(m.kernels for m in members), time_us=sum(m.time_us for m in members),
            bound=bound_time.most_common(1)[0][0],
        ))
    return sorted(groups, key=lambda g: g.time_us, reverse=True)


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def _us(value: float) -> str:
    return f"{value / 1000:.2f} ms" if value >= 1000 else f"{value:.1f} µs"


def verdict_text(pred: Prediction) -> str:
    idle = f"GPU idle {pred.gpu_idle_fraction:.0%}"
    if pred.bound == "mixed":
        return f"mixed ({idle}: the CPU and the GPU are both near the step; speeding up either one helps)"
    return f"{pred.bound}-bound ({idle})"


# Leads the summary of a step that runs torch.compile'd code (capture/compiled.py).
COMPILED_AS_EAGER = "compiled step predicted as eager PyTorch (no model of torch.compile yet): "


def summary_line(pred: Prediction) -> str:
    return (
        f"{COMPILED_AS_EAGER if pred.compiled else ''}"
        f"step {_us(pred.step_time_us)} on {pred.gpu.name}: GPU {_us(pred.gpu_time_us)}, "
        f"host {_us(pred.host_time_us)}, {pred.kernels} kernels, {pred.sync_points} syncs -> "
        f"{verdict_text(pred)}; a host timer without synchronize would "
        f"read {_us(pred.naive_host_timer_us)}; kernel times: {pred.kernel_model}"
    )


def _range(low: float, high: float) -> str:
    return f"{_us(low)}-{_us(high)}"


def host_line(pred: Prediction) -> str:
    """Which CPUs the host side is for and was captured on, what it is made of, where it is uncertain (as
    ranges), and how much another CPU would change the step."""
    what_if = ", ".join(f"{_us(step)} with CPU work x{factor:g}" for factor, step in pred.step_time_by_host_speed)
    launch = (f"; {pred.launch_bound_ops} ops are launch-bound (their kernels finish before the next launch: "
              "fuse them with torch.compile, or replay the step as a CUDA graph)" if pred.launch_bound_ops else "")
    cpus = (f"target CPU {pred.target_cpu or 'not recorded'}, captured on {pred.capture_cpu or 'a CPU not recorded'}"
            f" (model Python: CPU time, fastest of {pred.python_timing_steps} "
            f"step{'s' if pred.python_timing_steps > 1 else ''})")
    python = f"model Python {_us(pred.python_time_us)}"
    if pred.python_time_range_us[1] > 0:
        python += (f" (range {_range(*pred.python_time_range_us)}: the CPU benchmarks' ratios between the two "
                   f"machines, the capture's readings; step {_range(*pred.step_time_range_us)} over it)")
    return (f"host: {pred.host}; {cpus}. CPU {_us(pred.host_time_us)} per step, of which {python}; "
            f"step {what_if}{launch}")


def comm_line(pred: Prediction) -> str | None:
    """Compute, communication (exposed and hidden) and step time of a step with collectives."""
    c = pred.comm
    if c is None:
        return None
    return (
        f"{c.world_size} ranks over {c.interconnect_name}: compute {_us(c.compute_us)}, communication "
        f"{_us(c.comm_us)} in {c.collectives} collectives ({_us(c.exposed_comm_us)} exposed, "
        f"{_us(c.hidden_comm_us)} hidden behind compute) -> step {_us(pred.step_time_us)} "
        f"({_us(c.step_without_comm_us)} if communication were free)"
    )


def sync_table(pred: Prediction) -> Table | None:
    if not pred.sync_groups:
        return None
    table = Table(title="Sync points (the host waits for the GPU)", title_justify="left")
    for name, justify in (("kind", "left"), ("source", "left"), ("× per step", "right"), ("stall", "right"),
                          ("saving with the fix", "right"), ("fix", "left")):
        table.add_column(name, justify=justify, overflow="fold")
    for g in pred.sync_groups:
        table.add_row(g.kind, g.source or "-", str(g.count), _us(g.stall_us), _us(g.saving_us), g.advice)
    return table


def ops_table(pred: Prediction, top: int = DEFAULT_TOP) -> Table:
    table = Table(title=f"Top ops by predicted time on {pred.gpu.name}", title_justify="left")
    for name, justify in (("op", "left"), ("phase", "left"), ("module", "left"), ("source", "left"),
                          ("×", "right"), ("FLOPs", "right"), ("bytes", "right"), ("FLOP/B", "right"),
                          ("bound", "left"), ("time", "right"), ("% step", "right")):
        table.add_column(name, justify=justify, overflow="fold")
    for g in group_ops(pred.ops)[:top]:
        share = g.time_us / pred.step_time_us if pred.step_time_us else 0.0
        table.add_row(
            short_op(g.op), g.phase, g.module or "-", g.source or "-", str(g.count), _si(g.flops, ""),
            _si(g.bytes, "B"), f"{g.intensity:.1f}", g.bound, _us(g.time_us), f"{share:.1%}",
        )
    return table


# Wide enough for the table when output goes to a file or pipe (rich would assume 80 columns).
PIPE_WIDTH = 180


def console_for_output() -> Console:
    console = Console()
    return console if console.is_terminal else Console(width=PIPE_WIDTH)


def short_op(op: str) -> str:
    """"aten.mm.default" -> "mm"; "aten.add.Tensor" -> "add.Tensor"."""
    return op.removeprefix("aten.").removesuffix(".default")


def print_prediction(pred: Prediction, console: Console | None = None, top: int = DEFAULT_TOP) -> None:
    console = console or console_for_output()
    console.print(ops_table(pred, top))
    syncs = sync_table(pred)
    if syncs is not None:
        console.print(syncs)
    console.print(summary_line(pred))
    console.print(host_line(pred))
    comm = comm_line(pred)
    if comm is not None:
        console.print(comm)
    uncosted = ", ".join(pred.uncosted) if pred.uncosted else "none"
    console.print(f"uncosted ops (time unknown, not zero): {uncosted}")
    for note in pred.notes:
        console.print(f"note: {note}")


def prediction_json(pred: Prediction) -> dict:
    """The --json contract: keep these key names (other tools read them)."""
    return {
        "gpu": pred.gpu.id, "gpu_name": pred.gpu.name, "kernel_model": pred.kernel_model, "host": pred.host,
        "step_time_us": pred.step_time_us, "first_step_us": pred.first_step_us,
        "naive_host_timer_us": pred.naive_host_timer_us,
        "gpu_time_us": pred.gpu_time_us, "host_time_us": pred.host_time_us, "kernels": pred.kernels,
        "bound": pred.bound, "gpu_idle_fraction": pred.gpu_idle_fraction, "sync_points": pred.sync_points,
        "uncosted": list(pred.uncosted), "notes": list(pred.notes), "compiled": pred.compiled,
        "python_time_us": pred.python_time_us, "launch_bound_ops": pred.launch_bound_ops,
        "python_time_range_us": list(pred.python_time_range_us), "step_time_range_us": list(pred.step_time_range_us),
        "capture_cpu": pred.capture_cpu, "target_cpu": pred.target_cpu,
        "python_timing_steps": pred.python_timing_steps,
        "step_time_by_host_speed": [{"cpu_work_factor": f, "step_time_us": t} for f, t in pred.step_time_by_host_speed],
        "sync_points_by_source": [{"source": g.source, "kind": g.kind, "count": g.count, "stall_us": g.stall_us,
                                   "saving_us": g.saving_us, "advice": g.advice} for g in pred.sync_groups],
        "comm": None if pred.comm is None else {
            "world_size": pred.comm.world_size, "interconnect": pred.comm.interconnect,
            "collectives": pred.comm.collectives, "compute_us": pred.comm.compute_us, "comm_us": pred.comm.comm_us,
            "exposed_comm_us": pred.comm.exposed_comm_us, "hidden_comm_us": pred.comm.hidden_comm_us,
            "step_without_comm_us": pred.comm.step_without_comm_us,
            "issue_host_us": pred.comm.issue_host_us, "noop_saving_us": pred.comm.noop_saving_us,
        },
        "parallel_host": None if pred.parallel_host is None else {
            "hook_us": pred.parallel_host.total_us, "fsdp_units": pred.parallel_host.units,
            "unmodelled_hooks": list(pred.parallel_host.unmodelled),
        },
        "ops": [
            {"op": p.op, "phase": p.phase, "module": p.module, "source": p.source, "flops": p.flops,
             "bytes": p.bytes, "intensity": p.intensity, "kernels": p.kernels, "time_us": p.time_us,
             "bound": p.bound, "roof": p.roof, "host_us": p.host_us, "python_us": p.python_us,
             "launch_bound": p.launch_bound, "sync": p.sync, "time_source": p.time_source,
             "time_uncertainty": p.time_uncertainty}
            for p in pred.ops
        ],
    }
