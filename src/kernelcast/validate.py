"""`kernelcast validate`: predicted and measured side by side, per op class and per step (needs a GPU)."""

from __future__ import annotations

import collections
import contextlib
from dataclasses import dataclass

from kernelcast.costs import cost_of
from kernelcast.measure import Measurement, measure_step, packet
from kernelcast.predict import Prediction, cost_context, predict_capture
from kernelcast.records import Capture, root_indices


@dataclass(frozen=True)
class ClassRow:
    kind: str  # op class, as costs/ names it: gemm, attention, conv, pointwise, copy_cast, norm, foreach, ...
    predicted_us: float
    measured_us: float
    predicted_kernels: int
    measured_kernels: int

    @property
    def error(self) -> float | None:
        return (self.predicted_us - self.measured_us) / self.measured_us if self.measured_us else None


@dataclass(frozen=True)
class Validation:
    workload: str
    prediction: Prediction
    measurement: Measurement
    rows: tuple[ClassRow, ...]

    @staticmethod
    def _error(predicted: float, measured: float) -> float:
        return (predicted - measured) / measured if measured else float("nan")

    @property
    def gpu_time_error(self) -> float:
        return self._error(self.prediction.gpu_time_us, self.measurement.gpu_time_us)

    @property
    def step_time_error(self) -> float:
        return self._error(self.prediction.step_time_us, self.measurement.step_ms_median * 1000)

    @property
    def kernels_error(self) -> float:
        return self._error(self.prediction.kernels, self.measurement.work_items)

    def memory_pairs(self) -> list[tuple[str, int, int]]:
        """(counter, predicted bytes, measured bytes) for peak, resident and reserved memory."""
        p, m = self.prediction.memory, self.measurement.memory
        if p is None or m is None:
            return []
        return [("peak (max_memory_allocated)", p.peak_bytes, m.max_allocated),
                ("resident (memory_allocated before)", p.resident_bytes, m.allocated_before),
                ("reserved (memory_reserved after)", p.reserved_bytes, m.reserved)]

    def memory_lines(self) -> list[str]:
        from kernelcast.report.memory_text import human_bytes

        return [f"memory {name}: predicted {human_bytes(pred)}, measured {human_bytes(meas)} "
                f"({self._error(pred, meas):+.1%})" for name, pred, meas in self.memory_pairs()]

    def to_json(self) -> dict:
        p, m = self.prediction, self.measurement
        return {
            "workload": self.workload, "gpu": p.gpu.id, "kernel_model": p.kernel_model,
            "predicted": {"gpu_time_us": p.gpu_time_us, "step_time_us": p.step_time_us, "kernels": p.kernels,
                          "host_time_us": p.host_time_us, "bound": p.bound},
            "measured": m.to_json(),
            "errors": {"gpu_time": self.gpu_time_error, "step_time": self.step_time_error,
                       "kernels": self.kernels_error},
            "memory": [{"counter": name, "predicted_bytes": pred, "measured_bytes": meas,
                        "error": self._error(pred, meas)} for name, pred, meas in self.memory_pairs()],
            "classes": [{"kind": r.kind, "predicted_us": r.predicted_us, "measured_us": r.measured_us,
                         "predicted_kernels": r.predicted_kernels, "measured_kernels": r.measured_kernels}
                        for r in self.rows],
        }


def family(op: str) -> str:
    """In-place and out-of-place variants launch the same kernel: "add_" and "add" are one family."""
    return packet(op).rstrip("_")


def compare(capture: Capture, prediction: Prediction, measurement: Measurement, workload: str = "") -> Validation:
    """Group both sides by op class. Measured kernels of an op family are matched to the captured ops of that
    family in launch order (each op takes as many kernels as it predicts), so each takes its op's class."""
    ctx = cost_context(prediction.gpu, capture)
    queues: dict[str, collections.deque] = collections.defaultdict(collections.deque)
    predicted = collections.defaultdict(lambda: [0.0, 0])
    roots = root_indices(capture.ops)  # the profiler names the op the step called, not the ops it calls
    for op, p, root in zip(capture.ops, prediction.ops, roots):
        cost = cost_of(op, ctx)
        kind = cost.kind if cost is not None and cost.kind else "other"
        predicted[kind][0] += p.time_us
        predicted[kind][1] += p.kernels
        for _ in range(p.kernels):
            queues[family(capture.ops[root].op)].append(kind)
    last_kind: dict[str, str] = {}
    measured = collections.defaultdict(lambda: [0.0, 0])
    for k in measurement.kernels:
        fam = family(k.op)
        queue = queues.get(fam)
        kind = queue.popleft() if queue else last_kind.get(fam, "other")
        last_kind[fam] = kind
        measured[kind][0] += k.duration_us
        measured[kind][1] += 1
    kinds = sorted(set(predicted) | set(measured), key=lambda c: -max(measured[c][0], predicted[c][0]))
    rows = tuple(ClassRow(c, predicted[c][0], measured[c][0], predicted[c][1], measured[c][1]) for c in kinds
                 if predicted[c][1] or measured[c][1])
    return Validation(workload, prediction, measurement, rows)


def validate_file(spec: str, gpu: str) -> Validation:
    from kernelcast.api import capture_file
    from kernelcast.calibrate import require_gpu
    from kernelcast.capture.workload import load_build, on_sys_path

    require_gpu()
    cap = capture_file(spec, gpu)
    prediction = predict_capture(cap, gpu)
    build, folder = load_build(spec)
    with on_sys_path(folder) if folder else contextlib.nullcontext():
        step, args = build()
        measurement = measure_step(step, tuple(args), recorded_ops={packet(op.op) for op in cap.ops if op.parent < 0})
    return compare(cap, prediction, measurement, spec)
