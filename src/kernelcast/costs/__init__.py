"""Stage 2: the device work of each captured op (FLOPs, bytes, kernels), from one registry of formulas."""

from . import (  # noqa: F401  (each registers its formulas)
    attention, collectives, composite, distance, elementwise, fft, foreach, histogram, index_ops, linalg, losses,
    matmul, padding, pooling, reduce_ops, selection)
from .registry import DEFAULT_CONTEXT, Cost, CostContext, cost_of, register, registered_ops

__all__ = ["DEFAULT_CONTEXT", "Cost", "CostContext", "cost_of", "register", "registered_ops"]
