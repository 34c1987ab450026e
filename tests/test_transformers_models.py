"""Capture real transformers models built from their configs (no weights), forward and training step."""

import pytest

from kernelcast.api import capture_file
from kernelcast.predict import predict_capture

pytest.importorskip("transformers")
WORKLOADS = "examples/hf_models.py"
SMALL = {"KC_LAYERS": "2", "KC_BATCH": "2", "KC_SEQ": "64"}


@pytest.mark.parametrize("model", ["gpt2", "llama", "bert", "vit"])
@pytest.mark.parametrize("kind", ["forward", "train"])
def test_capture_and_predict(model, kind, monkeypatch):
    for key, value in SMALL.items():
        monkeypatch.setenv(key, value)
    cap = capture_file(f"{WORKLOADS}:{model}_{kind}", gpu="h100")
    ops = {op.op for op in cap.ops}
    phases = {op.phase for op in cap.ops}
    attention = [op for op in ops if "scaled_dot_product" in op]
    assert attention, "attention must go to a fused CUDA backend"
    assert any(op in ops for op in ("aten.mm.default", "aten.addmm.default"))
    if kind == "train":
        assert phases == {"forward", "backward", "optimizer"}
        assert any(op.startswith("aten._foreach_") for op in ops)
    else:
        assert phases == {"forward"}
    pred = predict_capture(cap, "h100")
    assert pred.kernels > 10 and pred.step_time_us > 0 and not pred.uncosted
