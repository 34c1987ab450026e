"""What `kernelcast measure` and `kernelcast validate` print: a step measured on a GPU, and a prediction beside
its measurement per op class. Both read the measurement's fields only (kernelcast.measure Measurement,
kernelcast.validate Validation), so this stage imports neither."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from .format import time_text
from .memory_text import human_bytes


def measurement_lines(m: Any, workload: str, top: int) -> list[str]:
    """A measured step in a few lines: its step time and spread, GPU kernel time and work items, memory, and the
    `top` aten ops by kernel time. m: a Measurement (step_ms, step_ms_median, step_ms_spread in ms; gpu_time_us,
    work_items, memory, by_op())."""
    low, high = m.step_ms_spread
    lines = [f"{workload} on {m.device}: step {time_text(m.step_ms_median * 1e3)} (median of {len(m.step_ms)} x "
             f"back-to-back runs; {time_text(low * 1e3)}-{time_text(high * 1e3)}), GPU kernels "
             f"{time_text(m.gpu_time_us)}, {m.work_items} GPU work items"]
    if m.memory is not None:
        lines.append(f"memory: peak {human_bytes(m.memory.max_allocated)} (max_memory_allocated over one step), "
                     f"resident {human_bytes(m.memory.allocated_before)} before it, reserved "
                     f"{human_bytes(m.memory.reserved)} after it")
    for op, (n, t) in sorted(m.by_op().items(), key=lambda kv: -kv[1][1])[:top]:
        lines.append(f"  {op:40s} {n:5d} kernels {time_text(t):>10s}")
    return lines


def validation_table(v: Any, workload: str) -> Table:
    """Predicted against measured per op class (rows: kind, predicted_us, measured_us, error, kernel counts)."""
    table = Table(title=f"{workload}: predicted ({v.prediction.kernel_model}) vs measured on {v.measurement.device}")
    for col in ("op class", "predicted", "measured", "error", "kernels pred", "kernels meas"):
        table.add_column(col, justify="left" if col == "op class" else "right")
    for r in v.rows:
        err = f"{r.error:+.1%}" if r.error is not None else "-"
        table.add_row(r.kind, time_text(r.predicted_us), time_text(r.measured_us), err,
                      str(r.predicted_kernels), str(r.measured_kernels))
    return table


def validation_summary(v: Any) -> list[str]:
    """The step's totals, predicted against measured, then the memory lines the validation gives."""
    m, p = v.measurement, v.prediction
    return [f"GPU time: predicted {time_text(p.gpu_time_us)}, measured {time_text(m.gpu_time_us)} "
            f"({v.gpu_time_error:+.1%}); step: predicted {time_text(p.step_time_us)}, measured "
            f"{time_text(m.step_ms_median * 1e3)} ({time_text(m.step_ms_spread[0] * 1e3)}-"
            f"{time_text(m.step_ms_spread[1] * 1e3)}; {v.step_time_error:+.1%}); kernels {p.kernels} vs "
            f"{m.work_items} ({v.kernels_error:+.1%})", *v.memory_lines()]
