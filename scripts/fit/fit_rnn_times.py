"""Fit the cuDNN RNN time model (kernelcast/predict/rnn_time.py) to the H200 probe's kernel times.

    python3 scripts/fit/fit_rnn_times.py [--probe validation/probes/probe_rnn.json] [--out validation/probes/rnn_time_fit.json]

calibrate/rnn_times.py does the fitting (its docstring says what is fitted and how); this script reads the probe
(scripts/device/probe_rnn.py, run on the H200) and writes the fit with what it was fitted on and its error on the rows
themselves: the profile's `rnn` section (scripts/fit/build_h200_profile.py includes it). The zoo's RNN workloads are
not used: they are the held-out check (scripts/eval/zoo_validate.py --family rnn).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernelcast.calibrate.rnn_times import fit_all

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", default=str(ROOT / "validation/probes/probe_rnn.json"))
    parser.add_argument("--out", default=str(ROOT / "validation/probes/rnn_time_fit.json"))
    args = parser.parse_args()
    try:
        probe = json.loads(Path(args.probe).read_text())
    except (OSError, ValueError) as exc:
        print(f"fit_rnn_times.py: cannot read {args.probe}: {exc}", file=sys.stderr)
        return 2
    fit = fit_all(probe, Path(args.probe).name)
    Path(args.out).write_text(json.dumps(fit, indent=1) + "\n")
    for pass_, f in fit["step"].items():
        print(f"{pass_}: {f['rows']} rows, error on them median {f['error_on_rows']['median_abs']:.1%}, max "
              f"{f['error_on_rows']['max_abs']:.1%}; half ratio {f['half_ratio']}; {f['coefficients']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
