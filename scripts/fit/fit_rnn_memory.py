"""Fit cuDNN's RNN workspace size, and check the reserve-space rule, on the H200 probe's allocator events.

    python3 scripts/fit/fit_rnn_memory.py validation/probes/probe_rnn_memory.json \
        validation/probes/probe_rnn_memory_deep_h100.json [--out validation/probes/rnn_memory_fit.json]

calibrate/rnn_memory.py does the fitting (its docstring says how); this script reads the probe
(scripts/device/probe_rnn_memory.py, run on the H200) and writes the fit, whose coefficients predict/memory.py carries
(CUDNN_RNN_WORKSPACE_TERMS).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from kernelcast.calibrate.rnn_memory import fit_and_check  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probes", nargs="+", help="probe_rnn_memory.py files, their rows fitted together")
    parser.add_argument("--out", default="validation/probes/rnn_memory_fit.json")
    args = parser.parse_args()
    probes = [json.loads(Path(p).read_text()) for p in args.probes]
    merged = {**probes[0], "rows": [row for probe in probes for row in probe["rows"]]}
    result = {"command": f"python3 scripts/fit/fit_rnn_memory.py {' '.join(args.probes)}",
              "devices": sorted({p.get("device", "") for p in probes}), **fit_and_check(merged)}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
