"""The profile's host section from several host calibrations and the device probes beside them.

Host-side costs on the workplace's H200 machines swing up to 2x between runs (the same case, minutes apart:
validation/host_calibration_runs.json), far more than kernel times. One run's host section is one draw from that
spread; the median over runs is the typical host, and the section keeps every run's values beside it. Every case
is a microbenchmark of calibrate/host.py: nothing here is fitted to a workload.

A case that only some runs measured (one added later: the cuDNN/cuSOLVER library calls) would be one draw from a
host whose speed may sit anywhere in that spread; it is carried to the typical host by its runs' ratio of the
plain launch (REFERENCE_CASE, measured by every run) to that case's median over all runs. The calibrated host's
three CPU benchmarks ("cpu bench") are left out for the same reason: one run read them, and the target-host
scaling reads the merged "python bench" instead (predict/host.py calibration_bench).

The host µs per kernel a cuDNN call launches ("library launch", predict/host.py) comes from the device probe
scripts/device/probe_library_launches.py: per probe row with at least LIBRARY_MIN_ITEMS work items (where the call's
fixed part is a few percent of it), the host CPU time of the call over its items, their median, carried to the
typical host by the ratio of the Python benchmarks (the merged "python bench" over the mean of the probe's before
and after).
"""

from __future__ import annotations

import statistics

REFERENCE_CASE = "add (1 kernel)"
ONE_RUN_KEYS = ("cpu bench",)
LIBRARY_MIN_ITEMS = 50
LIBRARY_CASE = "library launch"


def _scaled(case: dict, factor: float) -> dict:
    return {k: (v * factor if k in ("median_us", "min_us", "max_us") else v) for k, v in case.items()}


def merge(runs: list[dict]) -> dict:
    """The per-case median host section of `runs` ([{"run": name, "host": host section}, ...], oldest first)."""
    hosts = [r["host"] for r in runs]
    reference = statistics.median(h[REFERENCE_CASE]["median_us"] for h in hosts)
    merged: dict = {}
    for name, value in hosts[-1].items():
        if name in ONE_RUN_KEYS:
            continue
        cases = [h[name] for h in hosts if isinstance(h.get(name), dict)]
        if len(cases) < len(hosts) and isinstance(value, dict) and "median_us" in value:
            cases = [_scaled(h[name], reference / h[REFERENCE_CASE]["median_us"]) for h in hosts
                     if isinstance(h.get(name), dict)]
        if name == "mixed chain":  # only newer runs have it (and its parts); their op lists are the same chain
            merged[name] = {**value, **{part: {"median_us": statistics.median(c[part]["median_us"] for c in cases
                                                                              if part in c)}
                                        for part in ("forward", "backward", "forward_no_grad") if part in value}}
        elif isinstance(value, dict) and "median_us" in value:
            merged[name] = {"median_us": statistics.median(c["median_us"] for c in cases),
                            "min_us": statistics.median(c["min_us"] for c in cases),
                            "max_us": statistics.median(c["max_us"] for c in cases),
                            "per_run_median_us": [round(c["median_us"], 3) for c in cases]}
        elif isinstance(value, dict):  # copy bandwidths: runs that measured them the way the last run did
            same = [c for c in cases if c.get("method") == value.get("method")]
            merged[name] = {k: (statistics.median(c[k] for c in same if k in c) if isinstance(v, float) else
                                _median_curve([c[k] for c in same if k in c]) if isinstance(v, list) else v)
                            for k, v in value.items()}
        else:
            merged[name] = value
    merged["runs"] = [r["run"] for r in runs]
    return merged


def _median_curve(curves: list[list]) -> list:
    """[[size, rate], ...] per run -> the per-size median rate."""
    return [[size, statistics.median(c[i][1] for c in curves)] for i, (size, _) in enumerate(curves[0])]


def library_launch_case(probe: dict, typical_bench_us: float, source: str) -> dict:
    """The "library launch" case from a probe_library_launches.py result, carried to the host whose merged
    Python benchmark is typical_bench_us. Raises ValueError if no probe row launches LIBRARY_MIN_ITEMS items."""
    rates = [r["host_us_median"] / r["work_items"] for r in probe["rows"] if r["work_items"] >= LIBRARY_MIN_ITEMS]
    if not rates:
        raise ValueError(f"no probe row launches {LIBRARY_MIN_ITEMS} work items or more")
    rate = statistics.median(rates)
    probe_bench = statistics.fmean([probe["cpu_bench_before"]["python_bench_us"],
                                    probe["cpu_bench_after"]["python_bench_us"]])
    scaled = rate * typical_bench_us / probe_bench
    return {"median_us": scaled, "min_us": scaled, "max_us": scaled, "probe_us": rate, "probe_rows": len(rates),
            "speed_ratio": typical_bench_us / probe_bench, "source": f"{source} ({probe['command']}, {probe['date']})"}
