"""The workspace a cuDNN convolution takes from PyTorch's caching allocator while it runs.

aten's cuDNN convolution (aten/src/ATen/native/cudnn/Conv_v8.cpp) asks the engine cuDNN's heuristics pick for a
workspace and allocates it from the caching allocator for the call: in max_memory_allocated(), freed as the
call returns, no output, so a capture cannot see it. Its size is one of three classes of the pass's operand
bytes (none; one copy, where an NHWC engine works on NCHW tensors through transposed copies; about two), the
class from a classifier fitted on the H200 (calibrate/workspace_model.py, profiles/h200_conv_workspace.json:
10-fold held out, 81% of 7110 passes in the right class). cuDNN versions and other GPUs' engines are assumed
to choose alike (not measured). With torch.backends.cudnn.benchmark on, cuDNN's fastest engine may take more.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from kernelcast.costs.conv_backend import CUDNN, conv_backend
from kernelcast.costs.launch_table import conv_features
from kernelcast.costs.matmul import conv_backward_pass, conv_key
from kernelcast.costs.tree_model import TreeClassifier
from kernelcast.records import OpRecord, TensorMeta

MODEL_FILE = "h200_conv_workspace.json"
FORWARD_OPS = ("convolution", "_convolution", "cudnn_convolution", "cudnn_convolution_transpose")
BACKWARD_OPS = ("convolution_backward",)


@lru_cache(maxsize=1)
def _model() -> tuple[TreeClassifier, dict[int, float]] | None:
    path = resources.files("kernelcast.profiles").joinpath(MODEL_FILE)
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    return TreeClassifier.from_dict(doc["classifier"]), {int(c): float(r) for c, r in doc["ratio_of_class"].items()}


@lru_cache(maxsize=4096)
def pass_workspace_bytes(key: tuple, operand_bytes: int) -> int:
    """Bytes of one cuDNN pass's workspace: conv_key (costs/matmul.py) and the bytes of its input, weight and
    output (or output gradient). 0 for a convolution PyTorch runs with its own kernel, or without the model."""
    model = _model()
    if model is None or not key or conv_backend(key) != CUDNN:
        return 0
    classifier, ratio_of = model
    return int(ratio_of.get(classifier.predict(conv_features(key)), 0.0) * operand_bytes)


def _tensor(op: OpRecord, name: str) -> TensorMeta | None:
    value = op.args.get(name)
    return value if isinstance(value, TensorMeta) else None


def conv_workspace(op: OpRecord) -> list[int]:
    """The workspace of one convolution op while it runs, [bytes] (empty where none): a forward's one pass; a
    backward's input- and weight-gradient passes run one after the other
    (aten/src/ATen/native/cudnn/ConvShared.cpp), each freeing its workspace, so the larger counts."""
    x = _tensor(op, "input") or _tensor(op, "self")
    w = _tensor(op, "weight")
    if x is None or w is None:
        return []
    if op.name in FORWARD_OPS:
        outs = op.tensors_out()
        if not outs:
            return []
        passes = [("conv_fwd", outs[0].nbytes)]
    elif op.name in BACKWARD_OPS:
        grad_out = _tensor(op, "grad_output")
        mask = tuple(op.args.get("output_mask", (True, True, True)))
        if grad_out is None or conv_backward_pass(mask) is None:
            return []
        passes = [(p, grad_out.nbytes) for p, want in (("conv_bwd_input", mask[0]), ("conv_bwd_weight", mask[1]))
                  if want]
    else:
        return []
    sizes = [pass_workspace_bytes(conv_key(x, w, op, p), x.nbytes + w.nbytes + y) for p, y in passes]
    return [max(sizes)] if sizes and max(sizes) > 0 else []
