"""Numbers and names as people read them: times in µs / ms / s, SI prefixes, short op names and sources."""

from __future__ import annotations

import re

from kernelcast.records.common import time_text  # noqa: F401 (the report's, kept where it is read)

SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_LAYER_INDEX = re.compile(r"\.\d+(?=\.|$)")


def si(value: float, unit: str = "") -> str:
    """1.3e12 FLOPs -> "1.3 T"; 2.5e9 bytes -> "2.5 GB"."""
    for scale, prefix in SI_PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.1f} {prefix}{unit}"
    return f"{value:.0f} {unit}".rstrip()


def short_op(op: str) -> str:
    """"aten.mm.default" -> "mm"; "aten.add.Tensor" -> "add.Tensor"."""
    return op.removeprefix("aten.").removesuffix(".default")


def module_pattern(module: str) -> str:
    """"GPT2LMHeadModel.transformer.h.3.attn" -> "GPT2LMHeadModel.transformer.h.*.attn"."""
    return _LAYER_INDEX.sub(".*", module)


def short_source(source: str) -> str:
    """"src/kernelcast/examples/gpt.py:37 in forward" -> "gpt.py:37 in forward" (the file's name, line, function)."""
    path, sep, rest = source.partition(":")
    return path.rsplit("/", 1)[-1] + sep + rest if sep else source


_PATH_AT_LINE = re.compile(r"(?:[^\s/:]*/)+([^\s/:]+:\d+)")


def short_paths(text: str) -> str:
    """Free text with each file path at a line in it ("/home/u/proj/train.py:63", "src/kernelcast/examples/gpt.py:63")
    down to the file's name and line, as short_source does for one source."""
    return _PATH_AT_LINE.sub(r"\1", text)


def tail(text: str, width: int) -> str:
    """The end of `text` in at most `width` characters ("…h.*.attn.c_attn"): a module path's last parts say most."""
    return text if len(text) <= width else "…" + text[len(text) - width + 1:]


def plural(count: int, noun: str) -> str:
    """ "1 sync", "0 syncs", "2 syncs"."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
