"""What `kernelcast measure` and `validate` print (report/device_runs.py), from stand-in measurements: the report
stage reads their fields only, so no GPU is needed to check the text."""

from types import SimpleNamespace

from rich.console import Console

from kernelcast.report.device_runs import measurement_lines, validation_summary, validation_table


def _measurement(memory=True):
    mem = SimpleNamespace(max_allocated=3 << 30, allocated_before=1 << 30, reserved=4 << 30) if memory else None
    return SimpleNamespace(device="NVIDIA H100 80GB HBM3", step_ms=(2.0, 2.1, 2.2), step_ms_median=2.1,
                           step_ms_spread=(2.0, 2.2), gpu_time_us=1800.0, work_items=42, memory=mem,
                           by_op=lambda: {"mm": (12, 900.0), "add": (20, 100.0), "softmax": (4, 300.0)})


def test_a_measured_step_reads_its_time_spread_kernels_memory_and_top_ops():
    lines = measurement_lines(_measurement(), "train.py:build", top=2)
    assert lines[0].startswith("train.py:build on NVIDIA H100 80GB HBM3: step 2.10 ms (median of 3 x")
    assert "2.00 ms-2.20 ms" in lines[0] and "GPU kernels 1.80 ms, 42 GPU work items" in lines[0]
    assert lines[1].startswith("memory: peak 3.00 GiB")
    assert [line.split()[0] for line in lines[2:]] == ["mm", "softmax"]  # by kernel time, the top two
    assert len(measurement_lines(_measurement(memory=False), "x", top=5)) == 1 + 3


def test_a_validation_reads_per_op_class_then_the_totals():
    row = SimpleNamespace(kind="matmul", predicted_us=950.0, measured_us=900.0, error=0.0556, predicted_kernels=12,
                          measured_kernels=12)
    none = SimpleNamespace(kind="copy", predicted_us=5.0, measured_us=0.0, error=None, predicted_kernels=1,
                           measured_kernels=0)
    v = SimpleNamespace(rows=[row, none], measurement=_measurement(),
                        prediction=SimpleNamespace(kernel_model="calibrated", gpu_time_us=1900.0,
                                                   step_time_us=2300.0, kernels=40),
                        gpu_time_error=0.0556, step_time_error=0.0952, kernels_error=-0.0476,
                        memory_lines=lambda: ["peak memory: predicted 3.10 GiB, measured 3.00 GiB (+3.3%)"])
    console = Console(width=120, record=True)
    console.print(validation_table(v, "train.py:build"))
    text = console.export_text()
    assert "predicted (calibrated) vs measured on NVIDIA H100" in text  # the title wraps to the table's width
    assert "+5.6%" in text and "950.0 µs" in text and " - " in text  # an op class without a measured time
    summary = validation_summary(v)
    assert summary[0].startswith("GPU time: predicted 1.90 ms, measured 1.80 ms (+5.6%); step: predicted 2.30 ms")
    assert summary[0].endswith("kernels 40 vs 42 (-4.8%)") and summary[1].startswith("peak memory")
