"""A Prediction as data: the record the report stage reads (records.PredictionRecord) and `--json` writes."""

from __future__ import annotations

from kernelcast.records import CommRecord, GPUSpec, OpSpan, PredictionRecord

from .memory import memory_json, memory_timeline_rows


def _comm(c) -> CommRecord | None:
    if c is None:
        return None
    return CommRecord(
        world_size=c.world_size, interconnect=c.interconnect, interconnect_name=c.interconnect_name,
        collectives=c.collectives, compute_us=c.compute_us, comm_us=c.comm_us, exposed_comm_us=c.exposed_comm_us,
        hidden_comm_us=c.hidden_comm_us, step_without_comm_us=c.step_without_comm_us,
        issue_host_us=c.issue_host_us, noop_saving_us=c.noop_saving_us,
    )


def prediction_record(pred) -> PredictionRecord:
    """Everything the report shows, from a predict.Prediction; the timeline's spans ride along with the ops."""
    spans = () if pred.timeline is None else tuple(
        OpSpan(s.cpu_start_us, s.cpu_end_us, s.gpu_start_us, s.gpu_end_us, s.stream, s.sync_wait_us)
        for s in pred.timeline.spans)
    hooks = pred.parallel_host
    return PredictionRecord(
        gpu=pred.gpu.id, gpu_name=pred.gpu.name, kernel_model=pred.kernel_model, host=pred.host,
        step_time_us=pred.step_time_us, first_step_us=pred.first_step_us,
        naive_host_timer_us=pred.naive_host_timer_us, gpu_time_us=pred.gpu_time_us,
        host_time_us=pred.host_time_us, kernels=pred.kernels, bound=pred.bound,
        gpu_idle_fraction=pred.gpu_idle_fraction, sync_points=pred.sync_points,
        ops=tuple(pred.ops), uncosted=pred.uncosted, notes=pred.notes, compiled=pred.compiled, compiled_as=pred.compiled_as,
        python_time_us=pred.python_time_us, launch_bound_ops=pred.launch_bound_ops,
        step_time_by_host_speed=pred.step_time_by_host_speed,
        python_time_range_us=pred.python_time_range_us, step_time_range_us=pred.step_time_range_us,
        step_time_run_range_us=pred.step_time_run_range_us, host_run_speed_range=pred.host_run_speed_range,
        step_range_us=pred.step_range_us,
        capture_cpu=pred.capture_cpu, target_cpu=pred.target_cpu, python_timing_steps=pred.python_timing_steps,
        python_lines=pred.python_lines, python_line_us=pred.python_line_us,
        sync_groups=tuple(pred.sync_groups),
        comm=_comm(pred.comm),
        parallel_host=None if hooks is None else {"hook_us": hooks.total_us, "fsdp_units": hooks.units,
                                                  "unmodelled_hooks": list(hooks.unmodelled)},
        workload=pred.workload,
        gpu_spec=GPUSpec(dict(pred.gpu.peak_flops), pred.gpu.mem_bw_bytes_per_s, pred.gpu.memory_bytes),
        spans=spans,
        memory_timeline=memory_timeline_rows(pred),
        memory=memory_json(pred),
        hazards=pred.hazards,
    )
