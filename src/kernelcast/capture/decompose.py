"""Ops that CUDA runs by calling other ops below autograd: record them with the ops they call.

The rule. An op that has no CUDA kernel in the CUDA build but a CompositeExplicitAutograd (or ...NonFunctional)
kernel runs that kernel at the CUDA dispatch key, below autograd: it calls other ops (an allocation and a
copy for `clone`, `cat` for `stack`, `clone` and `masked_fill_` for `masked_fill`, six pointwise ops and a
mean for `binary_cross_entropy_with_logits`), each dispatched again and each launching its own kernels. The
capture's recorder sees such an op at the Python dispatch key, before that kernel runs, so it records the op
and then runs the kernel itself, at the CUDA key, with the recorder still in force: the ops it calls are
recorded after it, with `parent` set to its index, and are decomposed in turn where they qualify. An op with
only a CompositeImplicitAutograd formula, called from there (below autograd, where its formula has not run
yet), is decomposed by its formula the same way.

Costs count the children, never the parent: a decomposed op (tagged "decomposed") launches nothing itself,
so nothing is counted twice, and each child is costed by its own formula, under the kind the calibrated model
knows it by (`clone` is an allocation and a `copy_`, which prices as the `copy` kinds a whole `clone` did).
Host time: the parent pays one op's dispatch plus one launch per kernel of its children; the children, called
from C++, pay nothing more (predict/host.py).

Kept whole, with the reason:
- ops the recorder answers itself (host reads, transfers, data-dependent shapes: recorder.py's handlers);
- views and allocations (`empty_like`, `new_empty`), which launch nothing;
- constructors of sparse tensors (`sparse_coo_tensor`, `_sparse_coo_tensor_unsafe`), which only alias their
  indices and values, and any op given a sparse tensor: capture/sparse.py runs those as CUDA does;
- convolution: its explicit kernel picks the backend (cuDNN, depthwise, ...) at run time from the device and
  cuDNN (ConvUtils.h, select_conv_backend); the capture keeps it whole and prices it by the measured launch
  table.
An op whose kernel turns out to launch by itself (a DispatchStub, with no ops under it: `copy_`) or to build
its output in C++ without calling ops (`_unsafe_view`) is recorded whole, as it runs.

Checked against the H200's launch chains (torch 2.11, validation/zoo_measured.json.gz): zoo dlrm_train_adagrad
(`binary_cross_entropy_with_logits` -> log_sigmoid_forward, fill_, sub_, mul_, sub_, mean: 6 kernels; `stack`
-> cat: 1), losses_train and swin_forward (`masked_fill` -> clone's copy_ and masked_fill_: 2),
audio_spectrogram_forward and t5_forward (`abs` -> abs.out: 1).
"""

from __future__ import annotations

import torch

from .cuda_path import CudaOpTable, op_name
from .sparse import SPARSE_CONSTRUCTORS

# Ops whose CUDA kernel is their CPU kernel: native_functions.yaml registers one device-generic C++ function for
# both keys (`CPU, CUDA: multinomial`, aten/src/ATen/native/Distributions.cpp), written in other ops. A CPU-only
# torch has that function at the CPU key: run there on fake CUDA tensors, the ops it calls are recorded as CUDA
# runs them, in the installed torch's version of the code. multinomial without replacement (or for one sample)
# checks its input before it samples: with max and min, two compares, an `&` and `_assert_async` in torch 2.11
# (measured on an H100: validation/probes/opinfo_items/opinfo_items_run1.json.gz, 14 work items, no copy to the
# host), with one aminmax in 2.13, and with `.item()` twice (two sync points) in the releases before either.
# index_fill_ with a tensor value (`CPU, CUDA: index_fill_`, TensorAdvancedIndexing.cpp) reads the value to the host
# (`source.item()`, a sync point) and fills with the number: trace's backward does, measured on the H100 as a copy
# to the host before the fill (OpInfo trace and index_fill). Where the run stops (a DispatchStub of the CUDA
# build, a check on a value the capture does not know) the op is recorded whole and priced as before (recorder.py
# falls back to its handler).
SHARED_CPU_CUDA = frozenset({"aten::multinomial", "aten::multinomial.out", "aten::index_fill_.int_Tensor"})
CPU_KEYSET = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)

# Explicit composite ops kept whole (see the docstring).
KEPT_WHOLE = frozenset({
    "aten::convolution", "aten::_convolution", "aten::convolution_overrideable",
    "aten::convolution_backward_overrideable",
    # repeat's explicit kernel (TensorShape.cpp) copies into an unfolded, self-overlapping view of its result,
    # which fake tensors cannot run ("data is not allocated": every Tensor.repeat failed to capture); CUDA runs
    # it as the one copy kernel costs/elementwise.py prices it as.
    "aten::repeat",
})
# Ops whose schema says they may alias their input, but which copy when asked for another dtype or device: their
# formula decides (`bag_size.to(float)` in a sparse EmbeddingBag backward, called below autograd, is a copy).
ALIAS_OR_COPY = frozenset({"aten::to"})
# Allocations: their explicit kernels only allocate (empty_like -> empty_strided), launching nothing either way.
ALLOCATIONS = ("aten::empty", "aten::new_empty")
# Messages of a kernel that launched by itself where a decomposition was expected: a DispatchStub (whose CUDA
# implementation this CPU-only build lacks) or a backend kernel.
SELF_LAUNCHING = ("DispatchStub: missing kernel for cuda", "with arguments from the 'CUDA' backend")
CUDA_KEYSET = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)


class Decomposer:
    """Which ops CUDA runs by calling other ops, and how to run them that way here."""

    def __init__(self, table: CudaOpTable | None, kept_whole: set) -> None:
        self._table = table
        self._kept_whole = kept_whole  # overloads the recorder answers itself
        self._explicit: dict = {}
        self._implicit: dict = {}
        self.self_launching: set = set()  # learnt while capturing

    def how(self, func: torch._ops.OpOverload) -> str | None:
        """"explicit", "implicit" (its formula, when called below autograd), "shared" (its CPU kernel, which is
        its CUDA kernel: SHARED_CPU_CUDA), or None: keep it whole."""
        if func in self.self_launching:
            return None
        if func.namespace == "aten" and op_name(func) in SHARED_CPU_CUDA:
            return "shared"
        if self._table is None:
            return None
        explicit = self._explicit.get(func)
        if explicit is None:
            explicit = self._explicit[func] = self._qualifies(func, self._table.decomposes_below_autograd)
        if explicit:
            return "explicit"
        implicit = self._implicit.get(func)
        if implicit is None:
            rule = self._table.decomposes_above_autograd
            if op_name(func).partition(".")[0] in ALIAS_OR_COPY:  # CompositeImplicit everywhere; not in the table
                rule = lambda name: name.partition(".")[0] in ALIAS_OR_COPY  # noqa: E731
            implicit = self._implicit[func] = self._qualifies(func, rule) and \
                torch._C._dispatch_has_kernel_for_dispatch_key(op_name(func), "CompositeImplicitAutograd")
        return "implicit" if implicit else None

    def _qualifies(self, func: torch._ops.OpOverload, rule) -> bool:
        name = op_name(func)
        return (func.namespace == "aten" and rule(name) and name not in KEPT_WHOLE and func not in self._kept_whole
                and not name.startswith(SPARSE_CONSTRUCTORS)
                and not name.startswith(ALLOCATIONS) and (not func.is_view or name.partition(".")[0] in ALIAS_OR_COPY)
                and torch.Tag.inplace_view not in func.tags)

    @staticmethod
    def run(func: torch._ops.OpOverload, how: str, args: tuple, kwargs: dict):
        """Run the op as CUDA does: its explicit kernel at the CUDA key, its implicit formula, or its shared
        device-generic kernel at the CPU key."""
        if how == "implicit":
            return func.decompose(*args, **kwargs)
        if how == "shared":
            return func.redispatch(CPU_KEYSET, *args, **kwargs)
        return func.redispatch(CUDA_KEYSET, *args, **kwargs)

    @staticmethod
    def outputs_fake(out) -> bool:
        """Whether every tensor the kernel returned is a FakeTensor. One that builds its output without calling
        ops (`_unsafe_view` makes a view of the storage in C++) returns a plain tensor: it is kept whole."""
        from torch._subclasses.fake_tensor import FakeTensor

        items = out if isinstance(out, (tuple, list)) else (out,)
        return all(isinstance(t, FakeTensor) for t in items if isinstance(t, torch.Tensor))

    @staticmethod
    def launched_by_itself(exc: BaseException) -> bool:
        return isinstance(exc, (RuntimeError, NotImplementedError)) and any(m in str(exc) for m in SELF_LAUNCHING)
