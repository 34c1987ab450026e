"""Stage 2: the device work of each captured op (FLOPs, bytes, kernels), from one registry of formulas."""

from . import attention, elementwise, foreach, matmul  # noqa: F401  (each registers its formulas)
from .registry import Cost, cost_of, register, registered_ops

__all__ = ["Cost", "cost_of", "register", "registered_ops"]
