"""Every aten overload kernelcast's code names exists in the installed torch, or is looked up by name.

CI runs this under each torch it tests (2.13 CPU, 2.14.1 CUDA): a release that removes an op kernelcast names
(torch 2.14 removed aten::cholesky) fails here with the file and line, not at the first capture's import.
"""

import io
import tokenize
from pathlib import Path

import pytest
import torch

from kernelcast.capture.aten_ops import overload, overloads

SOURCE = Path(__file__).resolve().parents[2] / "src" / "kernelcast"


def _named_overloads(path: Path) -> list[tuple[str, int]]:
    """(name.overload, line) for each `aten.NAME.OVERLOAD` in the code of `path` (strings and comments are
    tokens of their own, so a name in a docstring or a registry key such as "aten.mm" is not counted)."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
              if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)]
    found = []
    for i in range(len(tokens) - 4):
        a, dot1, name, dot2, over = tokens[i:i + 5]
        if (a.string == "aten" and dot1.string == "." and dot2.string == "." and name.type == tokenize.NAME
                and over.type == tokenize.NAME):
            found.append((f"{name.string}.{over.string}", a.start[0]))
    return found


def test_every_named_aten_overload_exists_in_this_torch():
    missing = [f"{path.relative_to(SOURCE)}:{line}: aten.{name}"
               for path in sorted(SOURCE.rglob("*.py")) for name, line in _named_overloads(path)
               if overload(name) is None]
    assert not missing, f"torch {torch.__version__} lacks (look them up with aten_ops.overloads): {missing}"


def test_the_scan_finds_overloads_in_code_and_not_in_strings(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('x = {aten.mm.default, torch.ops.aten.add.Tensor}\n"aten.nope.default"  # aten.gone.default\n')
    assert _named_overloads(sample) == [("mm.default", 1), ("add.Tensor", 1)]


def test_overloads_keep_only_what_this_torch_has():
    assert overload("mm.default") is torch.ops.aten.mm.default
    assert overload("no_such_op_anywhere.default") is None
    assert overload("mm.no_such_overload") is None
    assert overloads("mm.default", "no_such_op_anywhere.default") == frozenset({torch.ops.aten.mm.default})
    with pytest.raises(ValueError, match="name.overload"):
        overload("mm")
