"""Stage 2: the device work of each captured op (FLOPs, bytes, kernels), from one registry of formulas."""

# each module registers its formulas on import
from . import (attention, collectives, data_dependent, elementwise, embedding, foreach, gather,  # noqa: F401
               indexing, losses, matmul, norms, rnn, scans)
from .registry import DEFAULT_CONTEXT, Cost, CostContext, cost_of, register, registered_ops

__all__ = ["DEFAULT_CONTEXT", "Cost", "CostContext", "cost_of", "register", "registered_ops"]
