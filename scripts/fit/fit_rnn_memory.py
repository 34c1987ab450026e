"""Fit cuDNN's RNN workspace size, and check the reserve-space rule, on the H200 probe's allocator events.

    python3 scripts/fit/fit_rnn_memory.py validation/probes/probe_rnn_memory.json [--out validation/probes/rnn_memory_fit.json]

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
    parser.add_argument("probe")
    parser.add_argument("--out", default="validation/probes/rnn_memory_fit.json")
    args = parser.parse_args()
    result = {"command": f"python3 scripts/fit/fit_rnn_memory.py {args.probe}",
              **fit_and_check(json.loads(Path(args.probe).read_text()))}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
