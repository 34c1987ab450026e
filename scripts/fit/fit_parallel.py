"""Fit kernelcast's collective and FSDP2 / DDP host model to a device run of scripts/device/validate_distributed.py.

    PYTHONPATH=src python scripts/fit/fit_parallel.py validation/distributed \
        --out src/kernelcast/profiles/h200_parallel.json

Reads distributed_measured.json (the collective sweep) and distributed_profiles.json.gz (rank 0's compact
profiles) from the folder; prints the fits with their residuals, the collective fit as the TOML block
devices/interconnects.toml holds ([<link>.measured]), and writes the host-cost file the predict stage loads
(predict/parallel_host.py). What is fitted and how: calibrate/parallel_fit.py. Pure CPU work, a few seconds.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import sys
from pathlib import Path

from kernelcast.calibrate.parallel_fit import (fit_collective, fit_hooks, fsdp_hook_points,
                                               fit_per_tensor, fsdp_copy_points, host_issue_from_tiny_messages,
                                               nccl_kernels, post_launch_share, profiler_us_per_event,
                                               reducer_self_times, step_hook_totals, thread_role,
                                               thread_speed_index, unwaited_groups)

SWEPT = ("all_reduce", "all_gather", "reduce_scatter")
SINGLE_CONFIGS = ("llama", "gpt")  # the reference profiles: host speed 1, and the profiler's cost per event
FSDP_CONFIGS = ("llama_fsdp", "llama_fsdp.noop_comm", "gpt_fsdp", "gpt_fsdp.noop_comm")
DDP_CONFIGS = ("llama_ddp", "llama_ddp.noop_hook", "gpt_ddp", "gpt_ddp.noop_hook")
LINK = "nvlink4"


def fit_all(measured: dict, profiles: dict) -> dict:
    ranks = measured["world_size"]
    fits = {c: fit_collective(measured["collectives"], c, ranks) for c in SWEPT}
    kernels: dict = {}
    for compact in profiles.values():
        for key, durations in nccl_kernels(compact, ranks).items():
            kernels.setdefault(key, []).extend(durations)
    groups = unwaited_groups(kernels, fits)
    tiny = host_issue_from_tiny_messages(measured["collectives"], SWEPT, ranks)
    host_issue = statistics.median(tiny.values())
    shares = [x for compact in profiles.values() for x in post_launch_share(compact)]
    post_share = statistics.median(shares) if shares else 0.0
    speed = {name: thread_speed_index(compact, profiles[name.split("_")[0]]) for name, compact in profiles.items()
             if name.split("_")[0] in profiles}
    per_event = {name: profiler_us_per_event(measured["steps"][name]["ranks"][0]["profile"],
                                             measured["steps"][name]["ranks"][0]["host"]["issue_ms_median"],
                                             profiles[name]) for name in SINGLE_CONFIGS if name in profiles}
    k = statistics.median(per_event.values()) if per_event else 0.0
    points = [p for name in FSDP_CONFIGS if name in profiles
              for p in fsdp_hook_points(name, profiles[name], speed.get(name), k)]
    copies = fit_per_tensor([p for name in FSDP_CONFIGS if name in profiles
                             for p in fsdp_copy_points(name, profiles[name], speed.get(name), k)])
    hooks = fit_hooks(points)
    held_out = {}
    for model in ("llama", "gpt"):  # fitted on the other model only: how the structure carries over
        other = fit_hooks([p for p in points if not p.config.startswith(model)])
        held_out[model] = step_hook_totals([p for p in points if p.config.startswith(model)], other)
    reducer = {"reducer_copy": [], "grad_copy": []}
    for name in DDP_CONFIGS:
        if name in profiles:
            for key, values in reducer_self_times(profiles[name], speed.get(name), k).items():
                reducer[key].extend(values)
    roles = {name: {thread_role(profiles[name]["threads"][i]): f for i, f in index.items()
                    if thread_role(profiles[name]["threads"][i]) != "other"} for name, index in speed.items()}
    return {"per_event": per_event, "per_event_us": k, "copies": copies, "speed": roles, "ranks": ranks, "collectives": fits, "groups": groups, "host_issue_us": host_issue,
            "tiny": tiny, "post_launch_share": post_share, "call_host_us": host_issue * (1 + post_share), "points": points,
            "hooks": hooks, "totals": step_hook_totals(points, hooks), "held_out": held_out, "reducer": reducer}


def report(fit: dict) -> str:
    lines = [f"collectives at {fit['ranks']} ranks: t = intercept + bus bytes / busbw (relative least squares)"]
    for c, f in fit["collectives"].items():
        worst = max(f.residuals.items(), key=lambda kv: abs(kv[1]))
        lines.append(f"  {c:15s} intercept {f.intercept_us:6.1f} us  busbw {f.busbw_bytes_per_s / 1e9:6.1f} GB/s  "
                     f"worst residual {worst[1]:+.1%} at {worst[0]} B")
        lines.append("    " + " ".join(f"{s}:{r:+.1%}" for s, r in sorted(f.residuals.items())))
    lines.append("host issue (sweep at <= 16 KiB minus NCCL's ring/LL latency): " + ", ".join(
        f"{c} {v:.1f} us" for c, v in fit["tiny"].items()) + f"; median {fit['host_issue_us']:.1f} us")
    lines.append(f"CPU after the launch: {fit['post_launch_share']:.2f} of the time before it (c10d ops, profiles): "
                 f"one call {fit['call_host_us']:.1f} us of CPU")
    lines.append("check: NCCL kernels that did not wait for their peer (device time) against the fit's kernel time:")
    for g in fit["groups"]:
        f = fit["collectives"][g.collective]
        kernel = f.sweep_us(g.message_bytes) - fit["host_issue_us"]
        lines.append(f"  {g.collective:15s} {g.message_bytes:>11d} B  measured {g.kernel_us:7.1f} us (x{g.samples})  "
                     f"fit {kernel:7.1f} us ({(kernel - g.kernel_us) / g.kernel_us:+.1%})")
    lines.append("host speed index per profile (reference ops' time over the single-GPU step's, per thread):")
    for name, index in fit["speed"].items():
        lines.append(f"  {name:22s} " + "  ".join(f"{role} {value:.2f}" for role, value in index.items()))
    lines.append("profiler's CPU time per recorded event (profiled minus unprofiled step, over its events): "
                 + ", ".join(f"{n} {v:.2f} us" for n, v in fit["per_event"].items())
                 + f"; median {fit['per_event_us']:.2f} us")
    lines.append("FSDP2 copy ops: CPU time = base + per_tensor * tensors (µs, at the reference host speed)")
    for kind, h in fit["copies"].items():
        pts = " ".join(f"{p.config}(n={p.params}) {p.self_us:.0f}" for p in h.points)
        lines.append(f"  {kind:28s} base {h.base_us:7.1f}  per tensor {h.per_param_us:6.2f}   {pts}")
    lines.append("FSDP2 hooks: self time = base + per_param * P (µs, at the reference host speed, less the profiler)")
    for kind, h in fit["hooks"].items():
        pts = " ".join(f"{p.config.split('.')[0][:5]}{'/noop' if 'noop' in p.config else ''}:{p.unit or 'root'}"
                       f"(P={p.params}) {p.self_us:.0f}" for p in h.points if p.unit in ("", "model.layers.0", "blocks.0"))
        lines.append(f"  {kind:28s} base {h.base_us:7.1f}  per param {h.per_param_us:6.2f}   {pts}")
    lines.append("hooks' self time per step, measured vs fitted (vs fitted on the other model only):")
    for config, (measured, predicted) in fit["totals"].items():
        model = config.split("_")[0]
        other = fit["held_out"][model].get(config, (0.0, 0.0))[1]
        lines.append(f"  {config:22s} {measured / 1e3:6.2f} ms vs {predicted / 1e3:6.2f} ms "
                     f"({(predicted - measured) / measured:+.1%}); held out {other / 1e3:6.2f} ms "
                     f"({(other - measured) / measured:+.1%})")
    for key, values in fit["reducer"].items():
        if values:
            lines.append(f"DDP {key}: median self {statistics.median(values):.2f} us over {len(values)} calls")
    return "\n".join(lines)


def toml_block(fit: dict, measured: dict) -> str:
    env = measured["env"]
    lines = [f"[{LINK}.measured]", f'gpu = "h200"', f"ranks = {fit['ranks']}",
             f'nccl = "{env.get("nccl", "")}"', f'torch = "{env["torch"]}"', f'date = "{env["date"][:10]}"',
             f"host_issue_us = {fit['host_issue_us']:.1f}", f"call_host_us = {fit['call_host_us']:.1f}",
             'source = "scripts/device/validate_distributed.py --measure-only on 2 H200s (NVLink 4, NVLS off), fp32 sweep '
             '1 KiB-1 GiB; fitted by scripts/fit/fit_parallel.py validation/distributed"']
    for c, f in fit["collectives"].items():
        worst = max(abs(r) for r in f.residuals.values())
        lines.append(f"{c} = {{ latency_us = {f.intercept_us - fit['host_issue_us']:.1f}, "
                     f"busbw_bytes_per_s = {f.busbw_bytes_per_s:.4g}, max_residual = {worst:.3f} }}")
    return "\n".join(lines)


def artifact(fit: dict, measured: dict, folder: str) -> dict:
    env = measured["env"]
    return {
        "format": 1, "gpu": "h200", "device_name": env.get("device", ""), "torch": env["torch"],
        "nccl": env.get("nccl", ""), "date": env["date"][:10], "fitted_on": folder,
        "command": f"PYTHONPATH=src python scripts/fit/fit_parallel.py {folder}",
        "label": f"FSDP2 / DDP hooks fitted to the H200 profiles of {env['date'][:10]} (torch {env['torch']})",
        "note": "self times under torch.profiler: its per-event bookkeeping inside a hook is included",
        "fsdp": {k: {"base_us": round(h.base_us, 2), "per_param_us": round(h.per_param_us, 3),
                     "points": [[p.config, p.unit, p.params, round(p.self_us, 1)] for p in h.points]}
                 for k, h in fit["hooks"].items()},
        "fsdp_ops": {k: {"base_us": round(h.base_us, 2), "per_tensor_us": round(h.per_param_us, 3),
                         "points": [[p.config, p.params, round(p.self_us, 1), p.per_step] for p in h.points]}
                     for k, h in fit["copies"].items()},
        "profiler_us_per_event": round(fit["per_event_us"], 3),
        "fsdp_step_totals_us": {k: [round(m, 1), round(p, 1)] for k, (m, p) in fit["totals"].items()},
        "ddp": {"reducer_copy_us": round(statistics.median(fit["reducer"]["reducer_copy"]), 2),
                "grad_copy_us": round(statistics.median(fit["reducer"]["grad_copy"]), 2)},
        "collective_call_us": round(fit["call_host_us"], 1),
    }


def _dumps(data: dict) -> str:
    """Indented JSON with each innermost list on one line."""
    text = json.dumps(data, indent=1)
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + re.sub(r"\s*\n\s*", " ", m[1]) + "]", text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a device run's folder (distributed_measured.json, distributed_profiles.json.gz)")
    parser.add_argument("--out", help="write the host-cost file here (profiles/<gpu>_parallel.json)")
    args = parser.parse_args()
    folder = Path(args.folder)
    try:
        measured = json.loads((folder / "distributed_measured.json").read_text())
        profiles = json.load(gzip.open(folder / "distributed_profiles.json.gz", "rt"))
    except (OSError, ValueError) as exc:
        print(f"fit_parallel: cannot read the device run in {folder}: {exc}", file=sys.stderr)
        return 2
    fit = fit_all(measured, profiles)
    print(report(fit))
    print("\n# devices/interconnects.toml\n" + toml_block(fit, measured))
    if args.out:
        Path(args.out).write_text(_dumps(artifact(fit, measured, args.folder)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
