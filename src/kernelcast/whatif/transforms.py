"""The changes the what-ifs make to a workload: each a `prepare` for capture_workload (it runs after build(),
inside the capture, on the fake tensors build() made, and returns the step to run), never a change to the user's
own objects; and how to find what build() made (its models, optimizers, its batch argument). The memory fixes
(memory_fixes.py), the speed fixes (advise.py) and the device checks of both (scripts/device/advise_check.py) share them.
"""

from __future__ import annotations

import functools
from typing import Callable

from kernelcast.capture.workload import build_parameters

# Keyword arguments of build() taken to be the batch size, in order of preference.
BATCH_NAMES = ("batch", "batch_size", "bs", "micro_batch", "micro_batch_size")
FUSED_OPTIMIZERS = ("Adam", "AdamW", "SGD", "Adagrad")  # torch.optim classes with a fused CUDA implementation


def batch_parameter(build: Callable) -> str | None:
    """The name of build()'s batch-size argument (an int default), if it has one."""
    params = build_parameters(build)
    for name in BATCH_NAMES:
        if isinstance(params.get(name), int) and not isinstance(params.get(name), bool):
            return name
    return None


# -- finding what build() made ---------------------------------------------------------------------------


def _alive(kinds) -> list:
    """capture/lifetimes.py's alive(), imported when used (this module is imported without torch)."""
    from kernelcast.capture.lifetimes import alive

    return alive(kinds)


def root_modules() -> list:
    """The modules build() made that hold parameters and are no other module's child (the models). Inside a
    capture, only those whose parameters belong to its FakeTensorMode: a model of an earlier capture, or the
    user's own real model in a notebook, may still be alive and is never changed."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    mode = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)

    def ours(module) -> bool:
        params = list(module.parameters())
        if not params:
            return False
        local = [getattr(p, "_local_tensor", p) for p in params]  # a DTensor (FSDP2) holds its shard
        return mode is None or any(isinstance(t, FakeTensor) and t.fake_mode is mode for t in local)

    modules = _alive(torch.nn.Module)
    children = {id(c) for m in modules for c in m.children()}
    return [m for m in modules if id(m) not in children and ours(m)]


def _layers(root) -> list:
    """The layers to wrap: the children of the root's largest nn.ModuleList (by parameters), else its children."""
    import torch

    lists = [m for m in root.modules() if isinstance(m, torch.nn.ModuleList) and len(m) > 0]
    if lists:
        biggest = max(lists, key=lambda m: sum(p.numel() for p in m.parameters()))
        return list(biggest)
    return [c for c in root.children() if any(True for _ in c.parameters())]


# -- the changes (each a `prepare` for capture_workload: runs after build(), returns the step to run) ----------
def checkpoint_layers(step: Callable, args: tuple) -> Callable:
    from torch.utils.checkpoint import checkpoint

    for root in root_modules():
        for layer in _layers(root):
            forward = layer.forward

            def checkpointed(*a, _forward=forward, **k):
                return checkpoint(_forward, *a, use_reentrant=False, **k)

            layer.forward = checkpointed
    return step


def under_autocast(step: Callable, args: tuple) -> Callable:
    import torch

    @functools.wraps(step)
    def autocast_step(*a, **k):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return step(*a, **k)

    return autocast_step


def bf16_weights(step: Callable, args: tuple) -> Callable:
    import torch

    for root in root_modules():
        root.to(torch.bfloat16)
    return under_autocast(step, args)


def fused_optimizers(step: Callable, args: tuple) -> Callable:
    from torch.optim import Optimizer

    for opt in _alive(Optimizer):
        if type(opt).__name__ in FUSED_OPTIMIZERS:
            opt.defaults.update(fused=True, foreach=False)
            for group in opt.param_groups:
                group.update(fused=True, foreach=False)
    return step


def fully_sharded(step: Callable, args: tuple) -> Callable:
    """FSDP2 (fully_shard) on each layer and on the root; the optimizers get the sharded parameters (fully_shard
    replaces each module's parameters with new DTensor parameters; their state is still empty here)."""
    from torch.distributed.fsdp import fully_shard
    from torch.optim import Optimizer

    roots = root_modules()
    before = {name: p for root in roots for name, p in _named(root)}
    for root in roots:
        for layer in _layers(root):
            fully_shard(layer)
        fully_shard(root)
    after = {name: p for root in roots for name, p in _named(root)}
    new_for = {id(p): after[name] for name, p in before.items() if name in after}
    for opt in _alive(Optimizer):
        for group in opt.param_groups:
            group["params"] = [new_for.get(id(p), p) for p in group["params"]]
    return step


def _named(root) -> list:
    """Parameters by (root, name): fully_shard keeps the module objects (it changes their class) and names."""
    return [(f"{id(root)}.{name}", p) for name, p in root.named_parameters()]


def channels_last(step: Callable, args: tuple) -> Callable:
    """Parameters of every model build() made, and the step's 4-d tensor inputs, in channels_last, once."""
    import torch

    for root in root_modules():
        root.to(memory_format=torch.channels_last)
    converted = tuple(a.contiguous(memory_format=torch.channels_last)
                      if isinstance(a, torch.Tensor) and a.dim() == 4 else a for a in args)

    @functools.wraps(step)
    def step_on_converted(*_args, **kwargs):
        return step(*converted, **kwargs)

    return step_on_converted
