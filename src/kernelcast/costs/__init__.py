"""Stage 2: the device work of each captured op (FLOPs, bytes, kernels), from one registry of formulas."""

from . import (attention, collectives, composite, elementwise, fft, foreach, histogram, linalg, losses,  # noqa: F401
               matmul, padding)  # each registers its formulas
from .registry import DEFAULT_CONTEXT, Cost, CostContext, cost_of, register, registered_ops

__all__ = ["DEFAULT_CONTEXT", "Cost", "CostContext", "cost_of", "register", "registered_ops"]
