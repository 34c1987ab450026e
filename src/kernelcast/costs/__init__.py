"""Stage 2: the device work of each captured op (FLOPs, bytes, kernels), from one registry of formulas."""

from . import (attention, collectives, composite, distance, elementwise, fft, foreach, histogram, index_ops,  # noqa: F401
               linalg, losses, matmul, padding, pooling, reduce_ops, selection)  # each registers its formulas
from .registry import DEFAULT_CONTEXT, Cost, CostContext, cost_of, register, registered_ops

__all__ = ["DEFAULT_CONTEXT", "Cost", "CostContext", "cost_of", "register", "registered_ops"]
