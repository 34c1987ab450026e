"""Stage 2: the device work of each captured op (FLOPs, bytes, kernels), from one registry of formulas."""

from . import (  # noqa: F401  (each registers its formulas)
    attention, collectives, composite, data_dependent, detection, distance, elementwise, embedding, fft, foreach,
    fused, gather,
    generated,
    histogram, index_ops, indexing, linalg, losses, matmul, norms, padding, pooling, reduce_ops, rnn, scans,
    selection, sparse)
from .registry import DEFAULT_CONTEXT, Cost, CostContext, cost_of, register, registered_ops

__all__ = ["DEFAULT_CONTEXT", "Cost", "CostContext", "cost_of", "register", "registered_ops"]
