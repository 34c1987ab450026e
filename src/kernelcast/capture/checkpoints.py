"""torch.save inside a capture: what it makes the GPU and the host do, without writing the file.

torch.save pickles its object; every tensor's storage is written whole, and a storage on the GPU is first copied to
the host (torch/serialization.py `_save`: `storage.cpu()` for each storage not on the CPU, a blocking
device-to-host copy of all of its bytes: one copy and one sync point per storage, each storage once however many
tensors view it). A fake tensor holds no data and does not pickle, so every step that saved a checkpoint failed
to capture. Here the object is walked as pickle walks it, each CUDA storage's copy is recorded where it happens,
and nothing is written: a capture must not overwrite a user's checkpoint with placeholder bytes. torch.jit.save
writes nothing either, and loading what the capture saved is one clear error.
"""
from __future__ import annotations

import contextlib
import io
import os
import pickle
from typing import Any, Callable, Iterator
from unittest import mock

import torch

from kernelcast.errors import CaptureError
from kernelcast.records import TORCH_SAVE_SYNC

JIT_SAVE_NOTE = "torch.jit.save at {source}: not written in a capture"
UNWRITTEN_MESSAGE = ("torch.load of {what}, which this capture saved ({source}): a capture writes no files (fake "
                     "tensors hold no data); load a checkpoint saved before the capture, or build the state in it")
SAVE_NOTE = ("torch.save at {source}: {storages} CUDA storage(s), {mib:.1f} MiB, copied to the host (each a blocking "
             "copy and a sync point); the file is not written in a capture, its serialization is priced on the host "
             "(the time to a disk's page cache or a buffer, not a slow disk's)")


# Compressed sparse tensors have no storage of their own (untyped_storage() raises) and the capture does not record
# them (capture/sparse.py covers COO only): torch.save of one is one clear error.
COMPRESSED_LAYOUTS = (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)
COMPRESSED_MESSAGE = ("torch.save at {source} of a {layout} tensor: compressed sparse layouts are not modelled in a "
                      "capture; save it outside the captured step, or as COO (.to_sparse_coo())")


class _Walker(pickle.Pickler):
    """A pickler that visits what pickle would visit and calls `on_tensor` for each tensor instead of reducing it."""

    def __init__(self, on_tensor: Callable[[torch.Tensor], None]) -> None:
        super().__init__(io.BytesIO(), protocol=pickle.HIGHEST_PROTOCOL)
        self._on_tensor = on_tensor

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            self._on_tensor(obj)
            return int, (0,)  # pickled as nothing of note: the walk goes on past the tensor
        return NotImplemented


def _storage_view(tensor: torch.Tensor) -> torch.Tensor:
    """A 1-D view of all of `tensor`'s storage, in its dtype: what torch.save copies to the host."""
    numel = tensor.untyped_storage().nbytes() // tensor.element_size()
    return torch.as_strided(tensor, (numel,), (1,), 0)


@contextlib.contextmanager
def saves_recorded(copy_to_host: Callable[[torch.Tensor, str], None], note: Callable[[str], None],
                   where: Callable[[], str], serialized: Callable[[int, int], None]) -> Iterator[None]:
    """Patch torch.save (and torch.serialization.save) for the length of a capture.

    `copy_to_host(view, kind)` records one device-to-host copy of a CUDA tensor, a sync point labelled `kind`;
    `serialized(bytes, storages)` records the host's serialization of every storage saved (CPU ones too: each is
    written as a zip record, its CRC32 computed); `note(text)` adds a capture note; `where()` is the line a note
    names (the recorder's note_line). Errors: whatever pickle raises for an object torch.save could not save
    either.
    """
    # what the capture saved to, by path or file object's id: where it was saved, and the object (kept alive, so
    # that its id is not reused by another during the capture)
    unwritten: dict[Any, tuple[str, Any]] = {}

    def target(f: Any) -> Any:
        """A path (absolute) for a path or a file opened by name, else the object's id."""
        name = f if isinstance(f, (str, os.PathLike)) else getattr(f, "name", None)
        return os.path.abspath(os.fspath(name)) if isinstance(name, (str, os.PathLike)) else id(f)

    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        unwritten[target(f)] = (where(), f)
        seen: set[int] = set()
        written = {"bytes": 0, "cuda_bytes": 0, "cuda_storages": 0}

        def on_tensor(tensor: torch.Tensor) -> None:
            if tensor.is_sparse:  # pickled as its indices and values (Tensor._reduce_ex_internal)
                on_tensor(tensor._indices())
                on_tensor(tensor._values())
                return
            if tensor.layout in COMPRESSED_LAYOUTS:  # no storage of its own, and the capture records none of them
                raise CaptureError(COMPRESSED_MESSAGE.format(layout=str(tensor.layout).removeprefix("torch."),
                                                             source=where()))
            storage = tensor.untyped_storage()
            if storage._cdata in seen:
                return
            seen.add(storage._cdata)
            written["bytes"] += storage.nbytes()
            if tensor.device.type != "cuda":
                return
            written["cuda_bytes"] += storage.nbytes()
            written["cuda_storages"] += 1
            with torch.no_grad():
                copy_to_host(_storage_view(tensor.detach()), TORCH_SAVE_SYNC)

        _Walker(on_tensor).dump(obj)
        serialized(written["bytes"], len(seen))
        note(SAVE_NOTE.format(source=where(), storages=written["cuda_storages"], mib=written["cuda_bytes"] / 2**20))

    def jit_save(module: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        unwritten[target(f)] = (where(), f)
        note(JIT_SAVE_NOTE.format(source=where()))

    def module_save_to_buffer(module: Any, *args: Any, **kwargs: Any) -> bytes:
        note(JIT_SAVE_NOTE.format(source=where()))
        return b""

    def guarded(load: Callable) -> Callable:
        def checked_load(f: Any, *args: Any, **kwargs: Any) -> Any:
            saved = unwritten.get(target(f))
            if saved is not None:
                what = os.fspath(f) if isinstance(f, (str, os.PathLike)) else "a buffer"
                raise CaptureError(UNWRITTEN_MESSAGE.format(what=what, source=saved[0]))
            return load(f, *args, **kwargs)
        return checked_load

    with contextlib.ExitStack() as stack:
        for module, name, patch in ((torch, "save", save), (torch.serialization, "save", save),
                                    (torch.jit, "save", jit_save),
                                    (torch.jit.RecursiveScriptModule, "save", jit_save),  # ScriptModule.save(f)
                                    (torch.jit.RecursiveScriptModule, "save_to_buffer", module_save_to_buffer),
                                    (torch, "load", guarded(torch.load)),
                                    (torch.serialization, "load", guarded(torch.serialization.load)),
                                    (torch.jit, "load", guarded(torch.jit.load))):
            stack.enter_context(mock.patch.object(module, name, patch))
        yield
