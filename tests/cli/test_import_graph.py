"""Each stage imports only the stages below it (issue 35): records and helpers, devices, costs, capture, predict,
report, then the tools built on them. Read from the source (ast), every import, at module level or inside a
function; the few that reach up are listed with why."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "kernelcast"

# A stage may import any stage of a lower rank. Helpers first; the tools (calibrate, measure, validate, the
# what-ifs, the notebook API, the CLI) sit above the pipeline they drive; measure (the one timing protocol on a
# GPU) below calibrate, which times its microbenchmarks with it.
RANK = {
    "_fake_cuda": 0, "errors": 0, "progress": 0, "gc_pause": 0, "outputs": 1, "records": 2,
    "devices": 2, "costs": 3, "profiles": 3, "capture": 4, "predict": 5, "report": 6,
    "api": 7, "measure": 7, "calibrate": 8, "validate": 9, "whatif": 8,
    "cli": 11, "__main__": 12, "__init__": 12, "examples": 12,
}
# Imports that reach a higher stage, each inside the function that needs it, and why.
UPWARD = {
    ("capture/api.py", "predict"): "CaptureBlock.predict(), the notebook API's one-line capture-then-predict",
    ("capture/inductor.py", "predict"): "max-autotune's choice between Inductor's templates and the extern "
                                        "kernel, made as Inductor would: by the kernel model's times",
    ("predict/__init__.py", "report"): "Prediction's notebook methods (print, summary, the plots, HTML)",
}


def _stage(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem


def _imported_stages(path: Path) -> set[str]:
    """The kernelcast stages a file imports, absolute or relative to the package root."""
    nested = len(path.relative_to(SRC).parts) > 1
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                names = [node.module or ""]
            elif node.level == (2 if nested else 1):  # from ..stage import x / (top-level module) from .stage
                names = ["kernelcast." + (node.module or "")]
        out |= {n.split(".")[1] for n in names if n.startswith("kernelcast.") and n.count(".") >= 1}
    return out


FILES = sorted(p for p in SRC.rglob("*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_a_stage_imports_only_the_stages_below_it(path):
    stage = _stage(path)
    assert stage in RANK, f"{stage} has no rank in tests/cli/test_import_graph.py"
    rel = str(path.relative_to(SRC))
    upward = {t for t in _imported_stages(path) - {stage, ""}
              if t in RANK and RANK[t] >= RANK[stage] and (rel, t) not in UPWARD}
    assert not upward, f"{rel} imports {sorted(upward)}, which are not below {stage}"


def test_every_listed_upward_import_is_still_there_and_upward():
    """An exception that the code no longer needs, or that is not one, is taken off the list."""
    for rel, target in UPWARD:
        assert target in _imported_stages(SRC / rel), (rel, target)
        assert RANK[target] >= RANK[_stage(SRC / rel)], (rel, target)
