"""docs/zoo.md from a re-prediction of the validation zoo (scripts/eval/zoo_validate.py --out ...).

    python3 scripts/eval/zoo_validate.py validation/zoo_measured.json.gz --out validation/zoo_repredicted.json
    python3 scripts/eval/zoo_report.py validation/zoo_repredicted.json docs/zoo.md

Per family and per workload: kernels per step and GPU time per step, predicted here against measured on the
device; per op class (the op the step called), summed over the zoo, the GPU-time error.
"""

from __future__ import annotations

import collections
import json
import statistics
import sys
from pathlib import Path

# issue 9: kernels per step; issue 10: GPU time per step (both: per family, median and worst |error|)
TARGETS = {"kernels": (0.02, 0.10), "gpu_time": (0.05, 0.15)}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


def _stats(errors: list[float]) -> tuple[float, float] | None:
    a = [abs(e) for e in errors if e is not None]
    return (statistics.median(a), max(a)) if a else None


def _cell(stats: tuple[float, float] | None, target: tuple[float, float]) -> str:
    if stats is None:
        return "-"
    median, worst = stats
    met = median <= target[0] and worst <= target[1]
    return f"{median:.1%} / {worst:.1%}" + (" (met)" if met else "")


def _library_note(doc: dict) -> str:
    """Which transformers built the models here and on the device: a version skew changes what a model runs."""
    here, there = doc.get("transformers"), doc.get("device_transformers")
    if here and here == there:
        return (f"Both sides built the transformers models with transformers {here} (here it was put on the path "
                f"ahead of the venv's: `pip install --target DIR transformers=={here} 'huggingface-hub<2'`, then "
                "`PYTHONPATH=DIR:src`), so the captured models are the measured ones.")
    return (f"The device built the transformers models with transformers {there}, this machine with {here}: where "
            "the two build a model differently, the capture follows this machine's.")


def family_table(rows: list[dict]) -> list[str]:
    fams: dict[str, list] = collections.defaultdict(list)
    for r in rows:
        fams[r["family"]].append(r)
    lines = ["| family | workloads | capture failures | kernels per step, median / worst | GPU time, median / worst |",
             "|---|---:|---:|---|---|"]
    everything = {"k": [], "g": []}
    for fam in sorted(fams):
        rs = fams[fam]
        ok = [r for r in rs if "comparison" in r]
        ks = [r["comparison"]["kernel_error"] for r in ok]
        gs = [r["comparison"]["gpu_time_error"] for r in ok]
        everything["k"] += ks
        everything["g"] += gs
        lines.append(f"| {fam} | {len(rs)} | {len(rs) - len(ok)} | {_cell(_stats(ks), TARGETS['kernels'])} | "
                     f"{_cell(_stats(gs), TARGETS['gpu_time'])} |")
    lines.append(f"| **all** | {len(rows)} | {sum('comparison' not in r for r in rows)} | "
                 f"{_cell(_stats(everything['k']), TARGETS['kernels'])} | "
                 f"{_cell(_stats(everything['g']), TARGETS['gpu_time'])} |")
    return lines


def workload_table(rows: list[dict]) -> list[str]:
    lines = ["| workload | family | kernels predicted / measured | error | GPU ms predicted / measured | error |",
             "|---|---|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: (r["family"], r["name"])):
        if "comparison" not in r:
            lines.append(f"| {r['name']} | {r['family']} | capture failed: {r.get('capture_error', '?')[:80]} | | | |")
            continue
        p, m, c = r["predicted"], r["measured"], r["comparison"]
        lines.append(f"| {r['name']} | {r['family']} | {p['kernels']} / {m['kernels']} | {_pct(c['kernel_error'])} | "
                     f"{p['gpu_time_us'] / 1e3:.2f} / {m['gpu_time_us'] / 1e3:.2f} | {_pct(c['gpu_time_error'])} |")
    return lines


def op_class_table(rows: list[dict], top: int = 25) -> list[str]:
    predicted: collections.Counter = collections.Counter()
    measured: collections.Counter = collections.Counter()
    for r in rows:
        for op, (p, m) in r.get("comparison", {}).get("op_times_us", {}).items():
            predicted[op] += p
            measured[op] += m
    ops = sorted(measured, key=lambda op: -measured[op])[:top]
    lines = ["| op (as the step called it) | predicted ms | measured ms | error |", "|---|---:|---:|---:|"]
    for op in ops:
        err = (predicted[op] - measured[op]) / measured[op] if measured[op] else None
        lines.append(f"| {op} | {predicted[op] / 1e3:.2f} | {measured[op] / 1e3:.2f} | {_pct(err)} |")
    return lines


def _short_device(name: str) -> str:
    """"NVIDIA H100 80GB HBM3" -> "H100": the title's name for the GPU measured."""
    words = name.replace("NVIDIA", "").split()
    return words[0] if words else name


def main() -> int:
    src, out = sys.argv[1], sys.argv[2]
    doc = json.loads(Path(src).read_text())
    rows = doc["workloads"]
    text = [
        f"# The validation zoo: predicted here, measured on the {_short_device(doc['device'])}",
        "",
        f"{len(rows)} workloads in {len({r['family'] for r in rows})} families (examples/zoo/registry.py), measured on "
        f"the {doc['device']} with torch {doc['device_torch']} (`PYTHONPATH=src python3 scripts/device/zoo_measure.py --out "
        f"$OUT/{Path(doc['measured_in']).name}`, {doc['measured_in']}), captured and predicted on a 2-core machine "
        "without a GPU by the committed code:",
        "",
        "```",
        doc["command"],
        f"python3 scripts/eval/zoo_report.py {src} {out}",
        "```",
        "",
        "Errors are (predicted - measured) / measured. Kernels per step count every GPU work item (kernels, memsets, "
        "memcpys) of one profiled steady-state step; GPU time is the sum of their durations. Targets: kernels per "
        "step median <= 2%, worst <= 10% per family (issue 9); GPU time median <= 5%, worst <= 15% per family "
        "(issue 10). \"(met)\" marks a family that meets both. " + _library_note(doc),
        "",
        "## Per family",
        "",
        *family_table(rows),
        "",
        "## Per op, summed over the zoo (the 25 with the most measured time)",
        "",
        *op_class_table(rows),
        "",
        "## Per workload",
        "",
        *workload_table(rows),
        "",
    ]
    Path(out).write_text("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
