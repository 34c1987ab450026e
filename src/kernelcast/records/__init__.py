"""Frozen records handed from one stage to the next: capture -> costs -> predict -> report.

- common.py: dtype sizes, the step's phases, the host-side markers a capture records beside aten ops, streams;
- capture.py: each op of a recorded step, its tensors, the settings it ran under, the Capture and its JSON;
- memory.py: the CUDA storages a captured step allocates and frees (MemoryTrace), which predict replays;
- prediction.py: the prediction as the report stage reads it and `--json` writes it.

Nothing here imports torch, so a saved capture can be costed, predicted and reported on any machine. Every name is
importable from `kernelcast.records` itself.
"""

from .capture import *  # noqa: F401,F403
from .capture import CAPTURE_FORMAT_VERSION, _arg_from_json, _arg_to_json  # noqa: F401
from .common import *  # noqa: F401,F403
from .memory import MemoryTrace  # noqa: F401
from .prediction import *  # noqa: F401,F403
from .prediction import PREDICTION_FORMAT_VERSION, PREDICTION_RECORD, SPAN_DECIMALS, SPAN_FIELDS  # noqa: F401
