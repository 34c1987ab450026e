"""When each CUDA storage of the workload is made and freed, on fake tensors that hold no memory.

A fake tensor has a storage object with a size in bytes, as a real one does, and torch keeps one Python object
per storage for as long as the storage lives (PyObject preservation: `t.untyped_storage()` returns the same
object every time while any tensor holds it). So a weak reference to that object dies exactly when the last
tensor or view on the storage is gone: when CUDA's caching allocator would get the block back. That is
Python's and autograd's own bookkeeping (saved tensors released after a node's backward, a gradient freed
once accumulated, `zero_grad(set_to_none=True)`), with nothing of kernelcast's in the way.

StorageTracker sees every tensor an op reads or makes (the Recorder calls it for each dispatch, recording or
not, from build() on), gives each new CUDA storage an Allocation, and logs its free from the weak reference's
callback. Storage resizes (`untyped_storage().resize_()`, which FSDP2 uses to free and re-allocate unsharded
parameters) are a free and a new allocation, as on a GPU. At the start of the recorded step it labels what is
alive by owner: module parameters and buffers, gradients, optimizer state (found through the modules and
optimizers alive then); at each optimizer step, the gradients it reads.
"""

from __future__ import annotations

import contextlib
import gc
import weakref
from typing import Any, Callable, Iterable, Iterator
from unittest import mock

import torch
from torch._subclasses.fake_tensor import FakeTensor

from kernelcast.records.memory import (BUFFER, BUILD, GRADIENT, OPTIMIZER_STATE, PARAMETER, STEP, WARMUP, Allocation,
                                     MemoryTrace)


def _local(t: Any) -> torch.Tensor | None:
    """The fake tensor holding a tensor's memory: itself, or a DTensor's local shard."""
    local = getattr(t, "_local_tensor", None)
    t = local if isinstance(local, torch.Tensor) else t
    return t if isinstance(t, FakeTensor) else None


def _is_cuda(t: FakeTensor) -> bool:
    return t.fake_device.type == "cuda"


class StorageTracker:
    """Allocations and frees of CUDA storages, in order (see the module docstring)."""

    def __init__(self, position: Callable[[], int] = lambda: -1, stream: Callable[[], int] = lambda: 0,
                 fake_mode: Any = None) -> None:
        self._position = position  # index of the next recorded op
        self._stream = stream  # the stream ops are issued on now
        # The capture's FakeTensorMode: fake tensors of another mode hold no device memory on a GPU either.
        self._fake_mode = fake_mode
        self.stage = BUILD
        self._live: dict[int, tuple[int, weakref.ref]] = {}  # storage key -> (allocation id, weak ref)
        self._nbytes: dict[int, int] = {}  # allocation id -> bytes
        self._allocs: list[list] = []  # [id, nbytes, stage, op, stream, storage key]
        self._labels: dict[int, tuple[str, str]] = {}  # allocation id -> (label, name)
        self._emptied: dict[int, weakref.ref] = {}  # CUDA storages resized to 0 bytes (FSDP2's), by key
        self.events: list[tuple[int, int]] = []
        self.step_start = self.step_end = -1
        self.closed = False
        self.dispatches = 0  # ops dispatched since the stage began (recorded or not)
        self.paused = 0  # > 0 while ops run that do no device work (DTensor's sharding propagation)
        self._ordinals: dict[int, int] = {}  # recorded op index -> its dispatch ordinal in the step
        # Modules and optimizers alive as the step began (label_owners): the step makes none a user keeps.
        self._owners: list | None = None

    # -- seeing tensors ----------------------------------------------------------------------------------
    def see_op(self, args: tuple, kwargs: dict, out: Any) -> None:
        """One dispatched op: the CUDA tensors it read and made (called after it ran)."""
        if self.paused:
            return
        self.dispatches += 1
        if self.stage == STEP:
            self._ordinals.setdefault(self._position(), self.dispatches)
        self.see(args)
        self.see(kwargs.values())
        self.see((out,))

    def _where(self) -> int:
        """An event's position: the next recorded op's index in the step; the dispatch ordinal in the warm-up
        (the step repeats it, so the two line up); -1 elsewhere."""
        if self.stage == STEP:
            return self._position()
        return self.dispatches if self.stage == WARMUP else -1

    def see(self, values: Iterable[Any]) -> None:
        """Every CUDA tensor among `values` (op arguments and results; tuples and lists are looked into)."""
        for value in values:
            if isinstance(value, torch.Tensor):
                self._see_tensor(value)
            elif isinstance(value, (list, tuple)):
                for v in value:
                    if isinstance(v, torch.Tensor):
                        self._see_tensor(v)

    def _see_tensor(self, t: torch.Tensor) -> None:
        t = _local(t)
        if t is None or not _is_cuda(t) or (self._fake_mode is not None and t.fake_mode is not self._fake_mode):
            return
        if t.layout == torch.sparse_coo:  # its memory is its indices' and values' (a mode's handler may ask)
            self._see_tensor(t._indices())
            self._see_tensor(t._values())
            return
        if t.layout != torch.strided:  # other sparse layouts: their member tensors come through ops too
            return
        storage = t.untyped_storage()
        key = storage._cdata
        entry = self._live.get(key)
        if entry is not None:
            if self._nbytes[entry[0]] != storage.nbytes():  # resized in place (aten.resize_ / set_)
                self.resized(storage, storage.nbytes())
            return
        nbytes = storage.nbytes()
        if nbytes > 0:
            self._allocate(storage, key, nbytes)
        elif key not in self._emptied:  # no memory yet (an empty tensor, FSDP2's freed parameters)
            self._emptied[key] = weakref.ref(storage, lambda _ref, key=key: self._emptied.pop(key, None))

    def _allocate(self, storage: Any, key: int, nbytes: int) -> int:
        alloc_id = len(self._allocs) + 1
        position = self._where()
        self._allocs.append([alloc_id, nbytes, self.stage, position if self.stage == STEP else -1, self._stream(),
                             key])
        self._nbytes[alloc_id] = nbytes
        self._live[key] = (alloc_id, weakref.ref(storage, lambda _ref, key=key: self._freed(key)))
        self.events.append((alloc_id, position))
        return alloc_id

    def _freed(self, key: int) -> None:
        entry = self._live.pop(key, None)
        if entry is not None and not self.closed:
            self.events.append((-entry[0], self._where()))

    def resized(self, storage: Any, new_nbytes: int) -> None:
        """A storage resized in place: its block is freed and one of the new size allocated (CUDA's resize
        allocates a new block and copies; a resize to 0 only frees)."""
        key = storage._cdata
        entry = self._live.get(key)
        if entry is None and key not in self._emptied:  # not a CUDA storage this tracker knows
            return
        if entry is not None:
            if self._nbytes[entry[0]] == new_nbytes:
                return
            self._live.pop(key)
            self.events.append((-entry[0], self._where()))
        self._emptied.pop(key, None)
        if new_nbytes > 0:
            self._allocate(storage, key, new_nbytes)
        else:  # a CUDA storage with no memory now; a later resize gives it some again
            self._emptied[key] = weakref.ref(storage, lambda _ref, key=key: self._emptied.pop(key, None))

    # -- labels ----------------------------------------------------------------------------------------
    def label(self, t: Any, label: str, name: str = "", overwrite: bool = False) -> None:
        t = _local(t)
        if t is not None and _is_cuda(t) and t.layout == torch.sparse_coo:  # a sparse gradient: its members
            self.label(t._indices(), label, name, overwrite)
            self.label(t._values(), label, name, overwrite)
            return
        if t is None or not _is_cuda(t) or t.layout != torch.strided:
            return
        entry = self._live.get(t.untyped_storage()._cdata)
        if entry is not None and (overwrite or entry[0] not in self._labels):
            self._labels[entry[0]] = (label, name)

    def label_owners(self, args: tuple = ()) -> None:
        """Label what is alive now by owner: parameters, gradients, optimizer state, module buffers, the
        step's inputs. Modules and optimizers are found among the objects alive (the model is the user's)."""
        from torch.optim import Optimizer

        owners = self._owners
        if owners is None:  # found once, as the step begins (a walk of every live object: 0.3 s for GPT-2)
            owners = self._owners = alive((torch.nn.Module, Optimizer))
        for owner in owners:
            if isinstance(owner, Optimizer):
                self.label_optimizer(owner)
        for owner in owners:
            if isinstance(owner, torch.nn.Module):
                for name, p in owner.named_parameters(recurse=False):
                    self.label(p, PARAMETER, name)
                    if p.grad is not None:
                        self.label(p.grad, GRADIENT, name)
                for name, b in owner.named_buffers(recurse=False):
                    self.label(b, BUFFER, name)
        self.label_inputs(args)

    def label_optimizer(self, optimizer: Any) -> None:
        """An optimizer's state tensors, and the gradients of its parameters (called as its step begins)."""
        for state in optimizer.state.values():
            for value in state.values() if isinstance(state, dict) else ():
                if isinstance(value, torch.Tensor):
                    self.label(value, OPTIMIZER_STATE)
        for group in optimizer.param_groups:
            for p in group["params"]:
                if isinstance(p, torch.Tensor):
                    self.label(p, PARAMETER)
                    if p.grad is not None:
                        self.label(p.grad, GRADIENT)

    def label_inputs(self, values: Any) -> None:
        """Tensors among the step's arguments (and their gradients, for leaves that get one)."""
        if isinstance(values, torch.Tensor):
            if values.grad is not None:
                self.label(values.grad, GRADIENT)
            self.label(values, BUFFER)
        elif isinstance(values, (list, tuple)):
            for v in values:
                self.label_inputs(v)
        elif isinstance(values, dict):
            for v in values.values():
                self.label_inputs(v)

    def forget_owners(self) -> None:
        """Look for the modules and optimizers alive again at the next label_owners (set-up made new ones)."""
        self._owners = None

    # -- stages ----------------------------------------------------------------------------------------
    def start_warmup(self) -> None:
        self.stage = WARMUP
        self.dispatches = 0

    def start_step(self, args: tuple = ()) -> None:
        self.label_owners(args)
        self.stage = STEP
        self.dispatches = 0
        self.step_start = len(self.events)

    def end_step(self, args: tuple = ()) -> None:
        """After the recorded step returned and its result was dropped: label what it left (gradients kept for
        the next step, optimizer state made lazily), then stop logging."""
        if self.step_end >= 0:
            return
        self.step_end = len(self.events)
        self.label_owners(args)
        self._owners = None  # held no longer than the step: the next capture must not find these models alive
        self.stage = "after"

    def result(self) -> MemoryTrace:
        self.closed = True
        allocations = tuple(
            Allocation(alloc_id, nbytes, stage, op, stream, *self._labels.get(alloc_id, ("", "")), storage=key)
            for alloc_id, nbytes, stage, op, stream, key in self._allocs)
        end = self.step_end if self.step_end >= 0 else len(self.events)
        return MemoryTrace(allocations, tuple(self.events[:end]), max(self.step_start, 0), end,
                           op_ordinals=tuple(sorted(self._ordinals.items())))


@contextlib.contextmanager
def storage_resizes_tracked(tracker: StorageTracker) -> Iterator[None]:
    """`UntypedStorage.resize_` (not an aten op on a tensor, so no dispatch mode sees it) reports to the tracker."""
    original = torch.UntypedStorage.resize_

    def resize_(storage, size):
        out = original(storage, size)
        tracker.resized(storage, int(size))
        return out

    with mock.patch.object(torch.UntypedStorage, "resize_", resize_):
        yield


@contextlib.contextmanager
def dtensor_propagation_untracked(tracker: StorageTracker) -> Iterator[None]:
    """DTensor's sharding propagation runs the op on global-shape fake tensors to learn its output's metadata
    (ShardingPropagator._propagate_tensor_meta_non_cached; under the capture's own FakeTensorMode, which it
    detects). On a GPU that is fake too: no device memory, no kernels. The tracker (and the recorder, which asks
    it) skips what runs there."""
    try:
        from torch.distributed.tensor._sharding_prop import ShardingPropagator
    except ImportError:  # a torch without torch.distributed
        yield
        return
    original = ShardingPropagator._propagate_tensor_meta_non_cached

    def propagate(self, *args, **kwargs):
        tracker.paused += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            tracker.paused -= 1

    with mock.patch.object(ShardingPropagator, "_propagate_tensor_meta_non_cached", propagate):
        yield


_PROXY_TYPES = (weakref.ProxyType, weakref.CallableProxyType)


def alive(kinds: type | tuple[type, ...]) -> list:
    """The objects of `kinds` alive now (whatif/transforms.py finds the model and optimizer this way too).
    Weak proxies are skipped: a live one stands for an object found anyway, and asking a dead one its type raises
    ReferenceError (torch's optimizers keep weak proxies of themselves). An object is judged by its type, not by
    isinstance: some libraries' lazy module proxies warn when their __class__ is asked, and silencing that with
    warnings.catch_warnings() resets every warning's once-per-location registry on exit, so a model's warning
    printed again, with its source line read from disk, in the recorded step (KernelBench L2 #28's InstanceNorm:
    0.8 ms of model Python on a 0.2 ms call)."""
    return [o for o in gc.get_objects() if type(o) not in _PROXY_TYPES and issubclass(type(o), kinds)]
