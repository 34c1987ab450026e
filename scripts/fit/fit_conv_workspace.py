"""Fit the cuDNN convolution workspace model to the device probe and write it where the memory replay reads it.

    PYTHONPATH=src python3 scripts/device/probe_conv_workspace.py --out h200_conv_workspace.json.gz   # on a GPU, once
    python3 scripts/fit/fit_conv_workspace.py validation/probes/h200_conv_workspace.json.gz

Writes src/kernelcast/profiles/h200_conv_workspace.json (calibrate/workspace_model.py says what is fitted and
how) and prints its held-out error.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

from kernelcast.calibrate.workspace_model import fit_conv_workspace_model, probe_rows

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "src" / "kernelcast" / "profiles" / "h200_conv_workspace.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probe", help="the probe's output (json.gz)")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    doc = json.load(gzip.open(args.probe, "rt"))
    source = (f"{doc['device']}, torch {doc['torch']}, cuDNN {doc['cudnn']}, {doc['date']}: "
              f"{Path(args.probe).name} (scripts/device/probe_conv_workspace.py)")
    model = fit_conv_workspace_model(probe_rows(doc), source)
    model["command"] = f"python3 scripts/fit/fit_conv_workspace.py {args.probe}"
    Path(args.out).write_text(json.dumps(model, separators=(",", ":")) + "\n")
    held = model["held_out"]
    print(f"wrote {args.out}: {model['rows']} passes, classes {model['class_counts']}, "
          f"ratios {model['ratio_of_class']}")
    print(f"held out ({held['by']}): class right {held['class_right']:.1%}; |error| in operand bytes, median / p90: "
          f"model {held['error_in_operand_bytes']}, none {held['none_error']}, NCHW rule {held['nchw_rule_error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
