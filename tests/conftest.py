"""kernelcast must be imported before torch (its fake CUDA runtime registers hooks that torch caches)."""

import os
import sys

import kernelcast  # noqa: F401  (before torch)

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
sys.path.insert(0, EXAMPLES)
