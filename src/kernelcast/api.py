"""The notebook/Python API: capture and predict a step, a workload file, or a `with` block."""

from __future__ import annotations

import contextlib
from typing import Any, Callable

from kernelcast.capture import capture, capture_step, capture_workload
from kernelcast.capture.host_reads import parse_assume, stated_reads
from kernelcast.capture.inductor import check_compile_mode
from kernelcast.capture.workload import build_kwargs, load_build, on_sys_path, one_line, where_it_failed
from kernelcast.devices import DEFAULT_GPU
from kernelcast.errors import CaptureError, KernelcastError
from kernelcast.predict import Prediction, predict_capture
from kernelcast.records import Capture

__all__ = ["capture", "capture_file", "predict", "predict_file"]


def capture_file(spec: str, gpu: str = DEFAULT_GPU, world_size: int = 1, args: dict[str, Any] | list[str] | None = None,
                 prepare: Callable | None = None, compile_mode: str | None = None,
                 assume: list[str] | None = None) -> Capture:
    """Capture a workload given as "path/to/file.py:build" or "example:NAME" (as rank 0 of world_size).
    args: build()'s keyword arguments, as a dict or as NAME=VALUE strings (typed from build()'s defaults);
    compile_mode: as if its step were wrapped in torch.compile(step, mode=compile_mode); assume: values of
    host reads of the GPU the capture cannot know, as "PATH:LINE=VALUE" (capture/host_reads.py; the CLI's
    --assume). Raises KernelcastError on a malformed statement, CaptureError when the step fails."""
    if compile_mode is not None:
        check_compile_mode(compile_mode)
    stated = [parse_assume(text) for text in assume or ()]
    build, folder = load_build(spec)
    kwargs = build_kwargs(build, args) if isinstance(args, list) else dict(args or {})
    with on_sys_path(folder) if folder else contextlib.nullcontext(), \
            stated_reads(stated) if stated else contextlib.nullcontext():
        try:
            return capture_workload(build, gpu, workload=_with_args(spec, kwargs), world_size=world_size,
                                    build_kwargs=kwargs, prepare=prepare, compile_mode=compile_mode)
        except KernelcastError:
            raise
        except Exception as exc:  # the user's code failed under fake CUDA: say where, in one line
            raise CaptureError(f"{spec} failed during capture: {one_line(exc)}{where_it_failed(exc)}"
                               f"{_what_to_do(exc, world_size)}") from exc


# torch.distributed's env:// rendezvous, asked for by init_process_group() without a launcher (torchrun sets
# RANK and WORLD_SIZE); kernelcast's --world-size gives it a fake process group of that size instead.
RENDEZVOUS_ENV_MISSING = "environment variable RANK expected"


def _what_to_do(exc: BaseException, world_size: int) -> str:
    """A hint after the error line, where the error has a known cause the user can fix."""
    if world_size == 1 and RENDEZVOUS_ENV_MISSING in str(exc):
        return ("; the step starts torch.distributed: capture it as one rank of N with --world-size N "
                "(world_size=N in the Python API)")
    return ""


def _with_args(spec: str, kwargs: dict[str, Any]) -> str:
    """The workload's name with the arguments it was built with: "train.py:build(batch=16)"."""
    return f"{spec}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})" if kwargs else spec


def predict_file(spec: str, gpu: str = DEFAULT_GPU, world_size: int = 1, interconnect: str | None = None,
                 args: dict[str, Any] | list[str] | None = None, compile_mode: str | None = None) -> Prediction:
    return predict_capture(capture_file(spec, gpu, world_size, args, compile_mode=compile_mode), gpu,
                           interconnect=interconnect)


def predict(step: Callable | Capture, args: Any = None, gpu: str = DEFAULT_GPU) -> Prediction:
    """Predict a step on `gpu`.

    - predict(step, args): tensors and modules in args are copied to fake CUDA and step(*args) is captured;
    - predict(build): build() returns (step, args), as in a workload file;
    - predict(capture): a saved or earlier Capture.
    """
    if isinstance(step, Capture):
        return predict_capture(step, gpu)
    if args is None:
        return predict_capture(capture_workload(step, gpu), gpu)
    if not isinstance(args, tuple):
        args = (args,)
    try:
        cap = capture_step(step, args, gpu)
    except KernelcastError:
        raise
    except Exception as exc:
        raise CaptureError(f"the step failed during capture: {one_line(exc)}{where_it_failed(exc)}") from exc
    return predict_capture(cap, gpu)
