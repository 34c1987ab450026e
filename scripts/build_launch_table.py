"""Turn an op sweep (scripts/sweep_ops.py on a GPU) into the launch-count table of a device profile.

    python3 scripts/build_launch_table.py validation/op_sweep.json src/kernelcast/profiles/h200.json

GEMMs and convolutions launch a number of GPU work items (split-K reduce kernels, workspace memsets, layout
transforms) that cuBLAS/cuDNN heuristics decide per shape; the sweep measured them, and the predictor looks
up the nearest measured shape. Other sections of an existing profile are kept.
"""

import json
import sys
from pathlib import Path

PROFILE_FORMAT = 1


def gemm_rows(cases):
    rows = []
    for c in cases:
        if "error" in c or not c["kind"].startswith(("mm_", "addmm_")):
            continue
        m, n, k, kind = c["m"], c["n"], c["k"], c["kind"]
        # (a transposed, b transposed, bias, M, N, K) of the product the op computes
        layout = {
            "mm_nn": (False, False, False, m, n, k),
            "mm_linear": (False, True, False, m, n, k),
            "addmm_linear": (False, True, True, m, n, k),
            "mm_grad_input": (False, False, False, m, k, n),
            "mm_grad_weight": (True, False, False, n, k, m),
        }[kind]
        a_t, b_t, bias, mm, nn, kk = layout
        rows.append([c["dtype"], a_t, b_t, bias, mm, nn, kk, c["n_items"]])
    return rows


def conv_rows(cases):
    rows = []
    for c in cases:
        if "error" in c or c["kind"] not in ("conv_fwd", "conv_bwd"):
            continue
        rows.append([c["kind"], c["dtype"], c["channels_last"], c["c_in"], c["c_out"], c["kernel"], c["stride"],
                     c["size"], c["n_items"]])
    return rows


def main() -> None:
    sweep_path, profile_path = sys.argv[1], Path(sys.argv[2])
    sweep = json.loads(Path(sweep_path).read_text())
    profile = json.loads(profile_path.read_text()) if profile_path.exists() else {}
    meta = sweep["meta"]
    profile.update({
        "format": PROFILE_FORMAT, "gpu": "h200", "device_name": meta["device"], "torch": meta["torch"],
        "cuda": meta["cuda"], "cudnn": meta["cudnn"], "date": meta["date"],
    })
    profile["launches"] = {
        "source": f"{meta['command']} ({meta['date']}); then python3 scripts/build_launch_table.py",
        "gemm_columns": ["dtype", "a_transposed", "b_transposed", "bias", "M", "N", "K", "work_items"],
        "gemm": gemm_rows(sweep["cases"]),
        "conv_columns": ["pass", "dtype", "channels_last", "c_in", "c_out", "kernel", "stride", "size", "work_items"],
        "conv": conv_rows(sweep["cases"]),
    }
    profile_path.write_text(json.dumps(profile, indent=None, separators=(",", ":")) + "\n")
    print(f"{len(profile['launches']['gemm'])} GEMM and {len(profile['launches']['conv'])} conv rows -> {profile_path}")


if __name__ == "__main__":
    main()
