"""Load a workload: `path/to/file.py:build`, or `example:NAME` for one shipped with kernelcast.

build() returns (step, args); step(*args) runs one step on device "cuda". build() may take keyword arguments
with defaults (`build(batch=8)`); `--arg batch=16` passes them, typed from each default (build_kwargs).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import sys
import traceback
from pathlib import Path
from typing import Callable, Iterator

from kernelcast.errors import WorkloadError

EXAMPLE_PREFIX = "example:"
EXAMPLES_PACKAGE = "kernelcast.examples"


@contextlib.contextmanager
def on_sys_path(folder: Path) -> Iterator[None]:
    """The workload's folder is importable while it loads and runs, as when Python runs a script."""
    entry = str(folder.resolve())
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def where_it_failed(exc: BaseException) -> str:
    """The innermost frame of the user's file in a traceback, as "file.py:12". A SyntaxError names its own place
    (its message says the file and line), and the import machinery's frames are never the user's."""
    if isinstance(exc, SyntaxError):
        return ""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if ("site-packages" not in frame.filename and "/kernelcast/" not in frame.filename
                and not frame.filename.startswith("<frozen")):
            return f" (at {Path(frame.filename).name}:{frame.lineno})"
    return ""


def one_line(exc: BaseException) -> str:
    """The exception as one line: its type and first line; a first line that only introduces the next (torch's
    `BackendCompilerFailed: backend='inductor' raised:`) takes the next non-empty line with it."""
    text = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    first = text[0] if text else ""
    if first.endswith(":") and len(text) > 1:
        first = f"{first} {text[1]}"
    return f"{type(exc).__name__}: {first}".rstrip(": ")


DEFAULT_FUNCTION = "build"  # the function a bare FILE.py names


def split_spec(spec: str) -> tuple[str, str]:
    """(path or example:NAME, function name) of a workload spec: FILE.py:FUNCTION, a bare FILE.py (its build()),
    or example:NAME."""
    if spec.startswith(EXAMPLE_PREFIX):
        return spec, DEFAULT_FUNCTION
    if ":" not in spec and spec.endswith(".py"):
        return spec, DEFAULT_FUNCTION
    path, sep, func = spec.rpartition(":")
    if not sep or not path or not func:
        raise WorkloadError(f"workload {spec!r} is not FILE.py:FUNCTION (e.g. train.py:build) or example:NAME")
    return path, func


def list_examples() -> list[str]:
    folder = Path(__file__).resolve().parent.parent / "examples"
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))


def _example_name(path: str) -> str:
    return path[len(EXAMPLE_PREFIX):].replace("-", "_")


def check_spec(spec: str) -> tuple[str, str]:
    """(path or example:NAME, function name), once the spec is well formed and names a file or example that
    exists. Reads no workload code and imports no torch, so a typo fails at once, not after torch loads."""
    path, func = split_spec(spec)
    if path.startswith(EXAMPLE_PREFIX):
        if _example_name(path) not in list_examples():
            raise WorkloadError(f"unknown example {_example_name(path)!r}; examples: {', '.join(list_examples())}")
    elif not Path(path).is_file():
        raise WorkloadError(f"workload file not found: {path}")
    return path, func


def load_build(spec: str) -> tuple[Callable, Path | None]:
    """(build function, folder to keep on sys.path while it runs)."""
    path, func = check_spec(spec)
    if path.startswith(EXAMPLE_PREFIX):
        module = importlib.import_module(f"{EXAMPLES_PACKAGE}.{_example_name(path)}")
        return getattr(module, func), None
    file = Path(path)
    module_name = f"kernelcast_workload_{file.stem}"
    with on_sys_path(file.parent):
        try:
            spec_obj = importlib.util.spec_from_file_location(module_name, file)
            assert spec_obj is not None and spec_obj.loader is not None
            module = importlib.util.module_from_spec(spec_obj)
            sys.modules[module_name] = module
            spec_obj.loader.exec_module(module)
        except Exception as exc:  # a broken workload file: report it in one line
            raise WorkloadError(f"could not load {path}: {one_line(exc)}{where_it_failed(exc)}") from exc
    build = getattr(module, func, None)
    if not callable(build):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))[:8]
        raise WorkloadError(f"{path} has no function {func!r} (callables there: {', '.join(found) or 'none'})")
    return build, file.parent


TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _typed(name: str, text: str, default) -> object:
    """`text` as the type of the parameter's default: bool, int, float or str (no default or None: an int, a
    float, else the text)."""
    try:
        if isinstance(default, bool):
            if text.lower() in TRUE_WORDS + FALSE_WORDS:
                return text.lower() in TRUE_WORDS
            raise ValueError(text)
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
        if isinstance(default, str):
            return text
    except ValueError:
        kind = type(default).__name__
        raise WorkloadError(f"--arg {name}={text}: not a valid {kind} (the default of {name} is {default!r})") from None
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def split_arg(pair: str) -> tuple[str, str]:
    name, sep, text = pair.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise WorkloadError(f"--arg {pair!r} is not NAME=VALUE (e.g. --arg batch=16)")
    return name, text.strip()


def build_parameters(build: Callable) -> dict[str, object]:
    """The keyword arguments build() takes, with their defaults (inspect.Parameter.empty where none)."""
    try:
        params = inspect.signature(build).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in params
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}


def build_kwargs(build: Callable, pairs: list[str] | None) -> dict[str, object]:
    """`--arg NAME=VALUE` pairs as build()'s keyword arguments, each typed from its default. An unknown name or a
    value that does not parse as its default's type is a WorkloadError (one line)."""
    if not pairs:
        return {}
    params = build_parameters(build)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in _signature_params(build))
    out: dict[str, object] = {}
    for pair in pairs:
        name, text = split_arg(pair)
        if name not in params and not takes_any:
            known = ", ".join(params) or "none"
            raise WorkloadError(f"--arg {name}: build() has no argument {name!r} (its arguments: {known})")
        default = params.get(name, inspect.Parameter.empty)
        out[name] = _typed(name, text, None if default is inspect.Parameter.empty else default)
    return out


def _signature_params(build: Callable) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(build).parameters.values())
    except (TypeError, ValueError):
        return []
