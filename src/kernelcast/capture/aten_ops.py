"""aten overloads named by kernelcast, looked up so that one a torch release lacks is left out, not fatal.

torch removes and renames aten operators between releases (torch 2.14 removed `aten::cholesky`:
`torch.cholesky` became Python over `linalg_cholesky`). A module-level `aten.cholesky.default` then fails the
import of the whole capture stage. Sets of ops that rules match against are built with `overloads()`, which
keeps the ones this torch has; an op a torch does not have is never dispatched there, so the rule has nothing
to miss. tests/capture/test_aten_ops.py reads every `aten.NAME.OVERLOAD` written in the source and checks that each
exists in the installed torch or is looked up here.
"""

from __future__ import annotations

import torch
from torch._ops import OpOverload


def overload(qualified: str) -> OpOverload | None:
    """The aten overload "name.overload" (e.g. "cholesky.default"), or None if this torch has no such op.

    Raises ValueError for a name without an overload part (a typo, not a version difference)."""
    name, sep, over = qualified.partition(".")
    if not sep or not over:
        raise ValueError(f"an aten overload is written name.overload, got {qualified!r}")
    packet = getattr(torch.ops.aten, name, None)  # OpOverloadPacket, or None: torch.ops raises AttributeError
    if packet is None:
        return None
    if over not in packet.overloads():
        return None
    return getattr(packet, over)


def overloads(*qualified: str) -> frozenset[OpOverload]:
    """The overloads of `qualified` that this torch has (see `overload`); the missing ones are left out."""
    found = (overload(name) for name in qualified)
    return frozenset(op for op in found if op is not None)
