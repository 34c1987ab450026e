"""Frozen records handed from one stage to the next: capture -> costs -> predict -> report.

- common.py: dtype sizes, the step's phases, the host-side markers a capture records beside aten ops, streams;
- capture.py: each op of a recorded step, its tensors, the settings it ran under, the Capture and its JSON;
- memory.py: the CUDA storages a captured step allocates and frees (MemoryTrace), which predict replays;
- prediction.py: the prediction as the report stage reads it and `--json` writes it.

Nothing here imports torch, so a saved capture can be costed, predicted and reported on any machine. The records
and constants below are importable from `kernelcast.records` itself; memory.py's categories from
`kernelcast.records.memory`.
"""

from .capture import (CAPTURE_FORMAT_VERSION, Capture, CaptureSettings, OpRecord, TensorMeta,  # noqa: F401
                      _arg_from_json, _arg_to_json)
from .common import (COMM_STREAM, DECOMPOSED_TAG, DTYPE_BYTES, ENGINE_NODES_OP, HOST_OP_PREFIX,  # noqa: F401
                     FUSED_MEMBER_TAG, FUSION_GROUP_OP, FUSION_GROUP_TAG, FUSION_OPS, FUSION_READS, FUSION_WRITES,
                     TORCHSCRIPT_CALL_TAG, TORCHSCRIPT_TAG, INSIDE_COMPILED_TAG, FROM_PYTHON_TAG, NEW_CUDNN_GRAPH_TAG, PHASES, POST_BACKWARD, RANGE_BEGIN_OP, RANGE_END_OP, RECORD_EVENT_OP,
                     RECORD_STREAM_OP, STEP_END_OP, TORCH_SAVE_OP, TORCH_SAVE_SYNC, WAIT_EVENT_OP, host_phase,
                     root_indices, stream_name)
from .memory import MemoryTrace  # noqa: F401
from .prediction import (MEMORY_KEYS, PREDICTION_FORMAT_VERSION, PREDICTION_RECORD, SPAN_DECIMALS,  # noqa: F401
                         SPAN_FIELDS, CommRecord, GPUSpec, Hazard, OpSpan, PredictedOp, PredictionRecord,
                         SyncPointGroup, is_prediction_json)
