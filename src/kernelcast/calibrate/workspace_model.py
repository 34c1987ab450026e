"""Fit the cuDNN convolution workspace model from a device probe's rows (scikit-learn, at calibration only).

What the probe (scripts/device/probe_conv_workspace.py) found on the H200 (torch 2.11, cuDNN 9.19, 7110 convolution
passes of the calibration sweep's designs): a cuDNN convolution's workspace is, in nearly every case, one of
three sizes relative to the bytes of the pass's three operands (input, weight, output; for a gradient, the
gradient of the output in the output's place):
- none (under a quarter of them): the engine works on the tensors where they lie. Depthwise convolutions, most
  channels_last ones, and the NCHW ones cuDNN runs with an NCHW kernel (`..._nchwkcrs_nchw_...`);
- one copy (x 1.0): an NHWC engine given NCHW tensors. cuDNN transposes the operands into the workspace
  (`nchwToNhwcKernel`), runs there and transposes the result back (`nhwcToNchwKernel`): of 3292 NCHW passes whose
  kernels included a transpose, 3291 took at least a copy's size; of 1153 without one, 1064 took under 5% of it;
- about two copies (x 2.1, the class's median): the same with a second buffer (split reductions, per-group
  runs), mostly grouped convolutions and weight gradients.
Which one a convolution gets is cuDNN's heuristics' choice, closed to us, so it is a classifier over the conv
launch classifier's features (costs/launch_table.py conv_features), gradient-boosted trees as
calibrate/launch_model.py fits them; each class is priced at the median ratio of its rows.
"""

from __future__ import annotations

import collections
import math

from kernelcast.calibrate.launch_model import export_classifier, new_classifier
from kernelcast.costs.launch_table import CONV_FEATURES, conv_features
from kernelcast.costs.matmul import spatial_mean
from kernelcast.records import DTYPE_BYTES

# Class edges in workspace / operand bytes: under NONE_BELOW is none, under ONE_COPY_BELOW one copy, above two.
NONE_BELOW = 0.25
ONE_COPY_BELOW = 1.5
FOLDS = 10
SEED = 0
# The classifier's size: three classes over the conv features; 10 folds over the H200's 7110 passes got 81%
# of the classes right with 100 iterations of 31 leaves (the conv launch classifier's size).
ITERATIONS = 100
LEAVES = 31
_PASS = {"forward": "conv_fwd", "input_grad": "conv_bwd_input", "weight_grad": "conv_bwd_weight"}


def conv_geometry(p: dict) -> tuple[list[int], list[int], list[int], list[int]]:
    """(spatial, kernel, stride, output spatial) of a sweep case's params (calibrate/sweep.py _conv_call's
    defaults: padding kernel // 2, or (kernel - stride) // 2 transposed)."""
    dims = p["dims"]
    spatial = list(p.get("spatial") or [p["size"]] * dims)
    kernel = list(p.get("kernel_shape") or [p["kernel"]] * dims)
    stride = list(p.get("stride_shape") or [p["stride"]] * dims)
    transposed, dil, extra = p.get("transposed", False), p.get("dilation", 1), p.get("output_padding", 0)
    if "padding" in p:
        pads = [p["padding"]] * dims
    else:
        pads = [max(k - s, 0) // 2 if transposed else k // 2 for k, s in zip(kernel, stride)]
    if transposed:
        out = [(n - 1) * s - 2 * q + dil * (k - 1) + extra + 1 for n, k, s, q in zip(spatial, kernel, stride, pads)]
    else:
        out = [(n + 2 * q - dil * (k - 1) - 1) // s + 1 for n, k, s, q in zip(spatial, kernel, stride, pads)]
    return spatial, kernel, stride, out


def case_key(p: dict) -> tuple:
    """The conv_key (costs/matmul.py) of a sweep case, as the capture would key the op."""
    spatial, kernel, stride, _ = conv_geometry(p)
    dims, transposed = p["dims"], p.get("transposed", False)
    pads = [p["padding"]] * dims if "padding" in p else \
        [max(k - s, 0) // 2 if transposed else k // 2 for k, s in zip(kernel, stride)]
    return (_PASS[p["pass"]], p["dtype"], bool(p["channels_last"]) and dims >= 2, p["c_in"], p["c_out"],
            spatial_mean(kernel), spatial_mean(stride), spatial_mean(spatial), p["groups"], p["batch"], dims,
            transposed, round(sum(pads) / dims), p.get("dilation", 1), p.get("output_padding", 0))


def operand_bytes(p: dict) -> int:
    """Bytes of a sweep case's input, weight and output (or output gradient): what an NHWC engine copies."""
    spatial, kernel, _, out = conv_geometry(p)
    itemsize = DTYPE_BYTES[p["dtype"]]
    x = p["batch"] * p["c_in"] * math.prod(spatial)
    y = p["batch"] * p["c_out"] * math.prod(out)
    w = p["c_out"] * (p["c_in"] // p["groups"]) * math.prod(kernel)
    return (x + y + w) * itemsize


def label(ratio: float) -> int:
    return 0 if ratio < NONE_BELOW else (1 if ratio < ONE_COPY_BELOW else 2)


def probe_rows(doc: dict) -> list[tuple[tuple, int, int]]:
    """(conv_key, workspace bytes, operand bytes) of each measured pass of the probe (heuristics' choice:
    cudnn.benchmark off, as torch's default)."""
    out = []
    for r in doc["rows"]:
        if "workspace" in r and not r.get("benchmark"):
            total = operand_bytes(r)
            if total > 0:
                out.append((case_key(r), int(r["workspace"]), total))
    return out


def fit_conv_workspace_model(rows: list[tuple[tuple, int, int]], source: str) -> dict:
    """The model (classifier and the bytes ratio of each class) fitted on every row, and its FOLDS-fold held-out
    error beside pricing every workspace at none (what kernelcast did before) and at one copy for NCHW
    non-depthwise convolutions (the simplest rule the probe suggests)."""
    import numpy as np

    x = np.array([conv_features(key) for key, _, _ in rows])
    ratios = np.array([ws / total for _, ws, total in rows])
    y = np.array([label(r) for r in ratios])
    ratio_of = {int(c): float(np.median(ratios[y == c])) for c in sorted(set(y.tolist()))}
    folds = np.random.RandomState(SEED).randint(0, FOLDS, len(rows))
    held = np.zeros(len(rows), dtype=int)
    for f in range(FOLDS):
        clf = new_classifier(ITERATIONS, LEAVES).fit(x[folds != f], y[folds != f])
        held[folds == f] = clf.predict(x[folds == f])
    totals = np.array([total for _, _, total in rows], dtype=float)
    measured = ratios * totals

    def error(predicted_ratio) -> dict:
        """Median and 90th percentile of |predicted - measured| workspace, in operand bytes."""
        e = np.abs(np.asarray(predicted_ratio) * totals - measured) / totals
        return {"median": round(float(np.median(e)), 4), "p90": round(float(np.percentile(e, 90)), 4)}

    nchw_rule = [0.0 if key[2] or (key[8] == key[3] and key[8] > 1) else 1.0 for key, _, _ in rows]
    model = new_classifier(ITERATIONS, LEAVES).fit(x, y)
    return {"classifier": export_classifier(model, CONV_FEATURES).to_dict(), "ratio_of_class": ratio_of,
            "classes": {"0": "none", "1": "one copy of the operands", "2": "about two copies"},
            "rows": len(rows), "class_counts": dict(collections.Counter(int(c) for c in y)),
            "held_out": {"by": f"{FOLDS}-fold over the rows", "class_right": round(float((held == y).mean()), 4),
                         "error_in_operand_bytes": error([ratio_of[int(c)] for c in held]),
                         "none_error": error([0.0] * len(rows)), "nchw_rule_error": error(nchw_rule)},
            "source": source}
