"""The predicted timeline as a Chrome/Perfetto trace (open it in ui.perfetto.dev or chrome://tracing).

One process for the host with a lane for the Python thread (a slice per op: dispatch and launch, after a
"model Python" slice for the model's own code before it, where the capture timed any), one process
for the GPU with a lane per stream (a slice per op's kernels), and a flow arrow from each launch to its kernels.
Times are the simulation of one step from an idle GPU, in microseconds. A third process carries the predicted
device memory (allocated and reserved, MiB) as counter tracks.
"""

from __future__ import annotations

from kernelcast.records import COMM_STREAM

from . import as_record
from .memory_text import memory_counter_events

HOST_PID, GPU_PID, CPU_TID = 1, 2, 1
FLOW_EPSILON_US = 0.001  # flow ends sit just inside the slices they bind to


def _meta(pid: int, name: str, tid: int | None = None) -> dict:
    event = {"ph": "M", "pid": pid, "name": "process_name" if tid is None else "thread_name", "args": {"name": name}}
    if tid is not None:
        event["tid"] = tid
    return event


def lane_name(stream: int) -> str:
    return "NCCL (communication)" if stream == COMM_STREAM else f"stream {stream}"


def chrome_trace(pred) -> dict:
    """The trace of a PredictionRecord (or of a Prediction's record)."""
    pred = as_record(pred)
    if not pred.spans:
        raise ValueError("this prediction was saved without its timeline")
    events = [_meta(HOST_PID, "host (CPU)"), _meta(HOST_PID, "Python thread", CPU_TID),
              _meta(GPU_PID, f"GPU: {pred.gpu_name} (predicted, {pred.kernel_model})")]
    streams = set()
    for op, span in zip(pred.ops, pred.spans):
        name = op.op.removeprefix("aten.").removesuffix(".default")
        common = {"module": op.module, "source": op.source, "phase": op.phase}
        host_dur = max(span.cpu_end_us - span.cpu_start_us, FLOW_EPSILON_US)
        python_dur = min(op.python_us, host_dur)
        if python_dur > 0:  # the model's own code before the op, then the op's dispatch and launch
            events.append({"ph": "X", "pid": HOST_PID, "tid": CPU_TID, "name": "model Python", "ts": span.cpu_start_us,
                           "dur": python_dur, "cat": "python", "args": {**common, "python_us": op.python_us}})
        events.append({"ph": "X", "pid": HOST_PID, "tid": CPU_TID, "name": name, "ts": span.cpu_start_us + python_dur,
                       "dur": max(host_dur - python_dur, FLOW_EPSILON_US), "cat": "sync" if op.sync else "launch",
                       "args": {**common, "host_us": op.host_us, "python_us": op.python_us, "sync": op.sync,
                                "sync_wait_us": span.sync_wait_us, "launch_bound": op.launch_bound}})
        if span.gpu_start_us is None:
            continue
        streams.add(span.stream)
        gpu_dur = span.gpu_end_us - span.gpu_start_us
        events.append({"ph": "X", "pid": GPU_PID, "tid": span.stream, "name": name, "ts": span.gpu_start_us,
                       "dur": gpu_dur, "cat": "kernel",
                       "args": {**common, "kernels": op.kernels, "flops": op.flops, "bytes": op.bytes,
                                "intensity": op.intensity, "bound": op.bound, "roof": op.roof, "time_us": op.time_us}})
        launch_ts = span.cpu_start_us + host_dur - FLOW_EPSILON_US
        events.append({"ph": "s", "id": op.index, "pid": HOST_PID, "tid": CPU_TID, "ts": launch_ts, "name": "launch",
                       "cat": "launch"})
        events.append({"ph": "f", "bp": "e", "id": op.index, "pid": GPU_PID, "tid": span.stream,
                       "ts": span.gpu_start_us + min(FLOW_EPSILON_US, gpu_dur / 2), "name": "launch", "cat": "launch"})
    events += [_meta(GPU_PID, lane_name(s), s) for s in sorted(streams)]
    events += memory_counter_events(pred)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"step_time_us": pred.step_time_us, "gpu_time_us": pred.gpu_time_us,
                          "host_time_us": pred.host_time_us, "bound": pred.bound}}
