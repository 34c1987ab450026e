"""Write docs/validation.md from the device results (capture validation, host microbenchmark, probe).

    python3 scripts/report_validation.py validation/ docs/validation.md
"""

import json
import statistics
import sys
from pathlib import Path


def family(op: str) -> str:
    """In-place and out-of-place variants launch the same kernel: add_ and add are one family."""
    return op.rstrip("_")


def op_mix_overlap(pred: dict, meas: dict) -> float:
    """Share of GPU work items whose op agrees: sum over ops of min(pred, meas) / max(total pred, total meas)."""
    p, m = {}, {}
    for op, n in pred.items():
        p[family(op)] = p.get(family(op), 0) + n
    for op, n in meas.items():
        m[family(op)] = m.get(family(op), 0) + n
    common = sum(min(p.get(op, 0), m.get(op, 0)) for op in set(p) | set(m))
    return common / max(sum(p.values()), sum(m.values()), 1)


def biggest_differences(pred: dict, meas: dict, n: int = 3) -> str:
    p, m = {}, {}
    for op, k in pred.items():
        p[family(op)] = p.get(family(op), 0) + k
    for op, k in meas.items():
        m[family(op)] = m.get(family(op), 0) + k
    diffs = sorted(((p.get(o, 0) - m.get(o, 0), o) for o in set(p) | set(m)), key=lambda d: -abs(d[0]))
    return ", ".join(f"{o} {d:+d}" for d, o in diffs[:n] if d) or "none"


def capture_section(data: dict) -> list[str]:
    lines = [
        "## Kernels per step: captured on fake CUDA vs profiled on the GPU",
        "",
        f"Device: {data['device']}, torch {data['torch']}, CUDA {data['cuda']}, cuDNN {data['cudnn']}, "
        f"run {data['date']}.",
        "",
        "Command (device machine, repository root):",
        "",
        "```",
        "PYTHONPATH=src python3 scripts/sweep_ops.py --out $OUT/op_sweep.json",
        "python3 scripts/build_launch_table.py $OUT/op_sweep.json src/kernelcast/profiles/h200.json",
        "PYTHONPATH=src python3 scripts/validate_capture.py --out $OUT/capture_validation.json",
        "```",
        "",
        "Predicted: kernelcast captures the step with FakeTensorMode (no GPU memory, no kernels run) and sums "
        "the GPU work items (kernels, memsets, memcpys) its cost registry gives each op. Measured: the same "
        "step built for real, 3 warm-up steps, then one step under torch.profiler; every GPU work item is "
        "counted and attributed to the aten op that launched it. Measured counts are run-independent: the "
        "workloads unchanged between the three device runs of 2026-11-29 gave identical counts each time. "
        "Op-mix agreement: the share of work items whose op matches "
        "(in-place and out-of-place variants count as one op).",
        "",
        "| workload | setting | captured ops | predicted kernels | measured kernels | error | op-mix agreement | largest differences (pred - meas) |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    errors = []
    for w in data["workloads"]:
        if "error" in w:
            lines.append(f"| {w['name']} | {w['workload']} | - | - | - | failed: {w['error'][:80]} | - | - |")
            continue
        p, m = w["predicted"], w["measured"]
        err = (p["kernels"] - m["kernels"]) / m["kernels"]
        errors.append(abs(err))
        setting = " ".join(f"{k.removeprefix('KC_').lower()}={v}" for k, v in w["env"].items()) or "defaults"
        lines.append(
            f"| {w['name']} | {setting} | {p['ops']} | {p['kernels']} | {m['kernels']} | {err:+.1%} | "
            f"{op_mix_overlap(p['by_op'], m['by_op']):.0%} | {biggest_differences(p['by_op'], m['by_op'])} |")
    if errors:
        lines += ["", f"Kernel-count error over {len(errors)} workloads: median {statistics.median(errors):.1%}, "
                      f"worst {max(errors):.1%} (target: within 5%)."]
    return lines


def host_section(runs: list[dict]) -> list[str]:
    meta = runs[0]["meta"]
    header = " | ".join(f"run {i + 1}: median (min-max)" for i in range(len(runs)))
    lines = ["", "## Host cost of eager ops (the constants of `predict/host.py`)", "",
             f"Device host: {meta['device']} machine, torch {meta['torch']}, {meta['date']}. "
             f"Command: `{meta['command']}`, run {len(runs)} times in separate device calls. Each number is "
             "µs of CPU per op: the median of 7 loops of 2000 ops (500 for item), with the fastest and slowest "
             "loop. Host-side times on these machines swing between runs (here by up to 45%); GPU kernel "
             "counts above do not.", "",
             f"| case | {header} |", "|---|" + "---:|" * len(runs)]
    for name in runs[0]["cases"]:
        cells = [f"{r['cases'][name]['median_us']:.2f} ({r['cases'][name]['min_us']:.2f}-"
                 f"{r['cases'][name]['max_us']:.2f})" for r in runs]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def speed_section(data: dict) -> list[str]:
    meta = data["meta"]
    lines = ["", "## Capture speed and memory (no GPU)", "",
             f"Command: `{meta['command']} --repeats 5 --json validation/capture_speed.json` on the development "
             f"machine ({meta['cpu_count']} cores, Python {meta['python']}, {meta['date']}), each run in a fresh "
             "process. Time: capture (build, warm-up step, recorded step) plus prediction, after imports; the "
             "imports of torch, kernelcast and transformers are listed apart. Peak RSS: the whole process.", "",
             "| workload | ops | capture+predict s, median (min-max) | imports s | peak RSS MB | target | met |",
             "|---|---:|---:|---:|---:|---|---|"]
    for r in data["rows"]:
        secs = r["seconds"]
        target = " ".join(t for t in (f"< {r['target_s']} s" if r["target_s"] else "",
                                      f"< {r['target_rss_mb']} MB" if r["target_rss_mb"] else "") if t) or "-"
        lines.append(f"| {r['name']} | {r['ops']} | {statistics.median(secs):.2f} ({min(secs):.2f}-{max(secs):.2f}) "
                     f"| {statistics.median(r['import_s']):.2f} | {r['rss_mb']:.0f} | {target} | "
                     f"{'-' if target == '-' else 'yes' if r['met'] else 'no'} |")
    return lines


def probe_section(data: dict) -> list[str]:
    lines = ["", "## Which attention backend CUDA picks (probe)", "",
             "`python3 scripts/probe_cuda_rules.py` on the device: `torch._fused_sdp_choice` for each case, the "
             "ground truth for `capture/attention.py` (tests/test_capture.py pins a few of these).", "",
             "| case | backend |", "|---|---|"]
    for case, backend in data.get("sdpa_choice", {}).items():
        if case != "prio_after":
            lines.append(f"| {case} | {backend} |")
    return lines


def main() -> None:
    folder, out = Path(sys.argv[1]), Path(sys.argv[2])
    lines = ["# Validation", "",
             "Every number here was produced by the commands shown, on the workplace's H200 machine (device "
             "tool), and is regenerated by `python3 scripts/report_validation.py validation/ docs/validation.md` "
             "from the JSON files in `validation/`.", ""]
    lines += capture_section(json.loads((folder / "capture_validation.json").read_text()))
    host_runs = [json.loads(p.read_text()) for p in sorted(folder.glob("host_microbench*.json"))]
    if host_runs:
        lines += host_section(host_runs)
    if (folder / "probe.json").exists():
        lines += probe_section(json.loads((folder / "probe.json").read_text()))
    if (folder / "capture_speed.json").exists():
        lines += speed_section(json.loads((folder / "capture_speed.json").read_text()))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
