"""A GPU's achieved rates fitted to the published torch-2.5 timings and to our own current-torch runs, held out
on our runs: which carries to a current torch (issue 30)?

    python3 scripts/eval/torch_era_check.py --gpu h100-sxm

KernelBench's published timings were taken with torch 2.5; our own runs of the same programs on the device
machine (scripts/device/kernelbench_call_times.py, the runs in kernelbench_validate.py OWN_RUNS) with a current
torch. Over the programs that keep the H200 busy (kernelbench_validate.py's rule), each call's predicted time
(build/kernelbench/rates_predicted.json, `scripts/fit/fit_gpu_rates.py predict`) against our runs' mean call, with
the datasheet carry alone, with factors fitted to the published timings, and with factors fitted to our runs
(each program left out of the fit that predicts it: calibrate/gpu_rates.py fit_factors): median |error| and the
share within 15%.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("device", "fit", "eval")]  # sibling scripts

from fit_gpu_rates import PREDICTED, _busy_row  # noqa: E402
from kernelbench_validate import OWN_RUNS, _ours, _published, own_runs  # noqa: E402

from kernelcast.calibrate.gpu_rates import errors as gpu_errors  # noqa: E402
from kernelcast.calibrate.gpu_rates import fit_factors, observations  # noqa: E402

WITHIN = 0.15


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="h100-sxm", choices=sorted(OWN_RUNS), help="kernelcast's id of the GPU")
    args = parser.parse_args()

    gpu = args.gpu
    predicted = json.loads(PREDICTED.read_text())
    reference = _ours()
    ours, files = own_runs(gpu)
    torch_version = OWN_RUNS[gpu].torch
    fits = {label: observations(predicted, {gpu: timings}, reference, gpu, _busy_row)
            for label, timings in (("published (torch 2.5)", _published()[gpu]), (f"ours ({torch_version})", ours))}
    whole = {label: fit_factors(obs) for label, obs in fits.items()}
    # each program against our runs; a fit's own programs left out of the fit that predicts them (fit_factors
    # leaves out nothing for a program it never saw)
    errors = {"datasheet carry alone": gpu_errors(predicted, {gpu: ours}, reference, gpu, _busy_row, lambda name: {})}
    for label, obs in fits.items():
        errors[f"fitted to {label}"] = gpu_errors(predicted, {gpu: ours}, reference, gpu, _busy_row,
                                                  lambda name, o=obs: fit_factors(o, leave_out=name))
    print(f"{gpu}: {len(errors['datasheet carry alone'])} GPU-busy programs against the mean call of our "
          f"{len(files)} runs ({', '.join(files)}); fitted factors held out by program")
    for label, errs in errors.items():
        print(f"  {label:34s} median |error| {statistics.median(errs):.1%}, within 15% "
              f"{sum(e <= WITHIN for e in errs) / len(errs):.0%}")
    for label, factors in whole.items():
        print(f"  factors fitted to {label}: " + " ".join(f"{c}={v:.2f}" for c, v in sorted(factors.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
