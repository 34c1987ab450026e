"""Sparse COO gradients as CUDA runs them: nn.Embedding / nn.EmbeddingBag(sparse=True) and the optimizers that
take their gradients (SGD, Adagrad, SparseAdam).

A CPU-only torch has no SparseCUDA kernels, and FakeTensorMode computes none of these ops, so the capture runs
each one the way its CUDA code does (torch 2.11; checked op by op on the H200, validation/probes/sparse_probe.json,
and in the zoo's sparse recommenders):

- dense += sparse (`param.add_(grad, alpha=-lr)`, Adagrad's and SparseAdam's state updates;
  sparse/cuda/SparseCUDATensorMath.cu, add_out_dense_sparse_cuda): for an uncoalesced sparse tensor with dense
  dims, one `index_add_` of its value rows into the dense tensor viewed as rows (`indexFuncLargeIndex`, measured
  alone under add_); a coalesced one runs one sparseElementwiseKernel over the same rows instead, recorded as
  the index_add_ too. Out of place (`dense + sparse`) copies the dense tensor first.
- sparse + sparse (add_out_sparse_cuda: a second sparse gradient accumulated, a backward without zeroing): the
  indices and values concatenated, two cat kernels (a scaling mul first when alpha is not 1).
- coalesce (`_coalesce_sparse_cuda`, SparseCUDATensor.cu): sums duplicate indices. The number of distinct
  indices is data: it comes from the indices' value hints where the capture has them (dynamic_shapes.py), else
  every index is taken as distinct, up to the positions of the sparse dims (an upper bound), and the capture
  says so. Thrust's unique_by_key returns
  that count to the host: a sync point. Its kernels are priced by costs/sparse.py.
- dense.sparse_mask(sparse) (SparseTensor.cpp: `ones_like(mask) * t`): a `ones` for the mask's values, then the
  sparse-dense mul gathers the dense rows at the mask's indices (`index`), clones the indices and multiplies:
  four work items, recorded as those ops.
- clone of a sparse tensor copies its indices and values (two device copies). Where AccumulateGrad receives a
  fresh sparse gradient it takes none: Case 1.2 of accumulate_grad.h steals it with a shallow
  `_sparse_coo_tensor_unsafe(indices, values)` when indices and values are contiguous and referenced by that
  tensor alone, as they are when the backward just made them; under the capture the recorder's references
  defeat the use-count check and the clone branch would be taken instead.
- The sparse backward of nn.EmbeddingBag (`_embedding_bag_backward` with sparse=True; EmbeddingBag.cpp,
  _embedding_bag_sparse_backward) is CompositeImplicit: the grad rows of each index's bag (index_select), the
  mean's 1 / bag size (a copy to float, a fill and a div, gathered per index, then a mul), per-sample weights'
  mul, and a COO tensor of the indices and those rows. Recorded op by op through that formula.
- Composite ops that build sparse tensors (`sparse_coo_tensor`, `_sparse_coo_tensor_unsafe`) are kept whole:
  they only alias their indices and values.
- A COO matrix times a dense one (`torch.sparse.mm(adj, x)`, `adj @ x`, a GCN layer; `_sparse_mm` is a zero
  fill and `_sparse_addmm` with beta 0), SparseCUDATensorMath.cu s_addmm_out_sparse_dense_cuda and
  SparseBlasLegacy.cpp: the matrix coalesced (a no-op when it is), its row indices cast to int32 and converted
  to CSR row offsets (cusparseXcoo2csr, recorded as `_convert_indices_from_coo_to_csr`), its column indices cast,
  the output zeroed (beta 0) or copied from `self`, then made column-major for cuSPARSE (a transposing copy
  unless it is one already), cuSPARSE's SpMM (recorded as `kernelcast::cusparse_spmm_`, costs/sparse.py), and
  the copy back. Its backward to the dense operand is `adj.t() @ grad`: a transpose (no kernel, uncoalesced),
  so the same chain after a coalesce, whose count the host reads back.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch.utils.weak import WeakIdKeyDictionary

from .tensor_device import device_type

aten = torch.ops.aten

SPARSE_ADDS = {aten.add_.Tensor, aten.add.Tensor}
EMBEDDING_BAG_SPARSE_ARG = 9  # _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size,
#                               maximum_indices, num_weights, scale_grad_by_freq, mode, sparse, ...)
# The autograd node that stores a leaf's gradient (torch/csrc/autograd/functions/accumulate_grad.h).
ACCUMULATE_GRAD_NODE = "torch::autograd::AccumulateGrad"
# Constructors of sparse COO tensors: they alias their indices and values; the Decomposer keeps them whole (run
# at the CUDA key on fake tensors, sparse_coo_tensor's explicit kernel fails its own layout check).
SPARSE_CONSTRUCTORS = ("aten::sparse_coo_tensor", "aten::_sparse_coo_tensor")
SPARSE_ACCUMULATE_NOTE = ("a sparse gradient added to another in place (a backward without zeroing the gradients): "
                          "the concatenation's kernels are priced, but the capture keeps the first one's rows")
# A sparse argument `x` of a recorded op is recorded with its members beside it: `x_indices`, `x_values`.
SPARSE_INDICES_SUFFIX, SPARSE_VALUES_SUFFIX = "_indices", "_values"
COALESCE_NOTE = ("coalesce of a sparse tensor: every index assumed distinct, up to the rows there are (an upper "
                 "bound on its size; the GPU reads the count back)")


SPARSE_MATMULS = {aten._sparse_addmm.default, aten.addmm.default, aten.mm.default}
SPARSE_TRANSPOSES = {aten.t.default, aten.transpose.int}
SPARSE_MULS = {aten.mul.Tensor, aten.mul.Scalar}
# cuSPARSE SpMM as s_addmm_out_csr_sparse_dense_cuda_worker dispatches it (AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES)
SPMM_DTYPES = {torch.float32, torch.float64, torch.complex64, torch.complex128}
_SPMM_LIBRARY: list = []  # the kernelcast::cusparse_spmm_ op's library, defined on first use


def cusparse_spmm_op():
    """kernelcast::cusparse_spmm_(crow, col, values, dense, out, beta): cuSPARSE's SpMM of a CSR matrix (int32
    row offsets and column indices, its values) and a dense matrix into the column-major `out`, in place; `out` is
    read too where beta is not 0. The capture calls it where CUDA calls cusparseSpMM, so the kernel is recorded with
    what it reads and writes."""
    if not _SPMM_LIBRARY:
        lib = torch.library.Library("kernelcast", "FRAGMENT")
        lib.define("cusparse_spmm_(Tensor crow, Tensor col, Tensor values, Tensor dense, Tensor(a!) out, "
                   "float beta) -> ()")
        lib.impl("cusparse_spmm_", lambda crow, col, values, dense, out, beta: None, "Meta")
        lib.impl("cusparse_spmm_", lambda crow, col, values, dense, out, beta: None, "CPU")
        _SPMM_LIBRARY.append(lib)
    return torch.ops.kernelcast.cusparse_spmm_.default


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, complex)) or (isinstance(x, torch.Tensor) and x.dim() == 0 and not is_sparse(x))


def _sparse_matrix(func, args: tuple) -> torch.Tensor | None:
    """The sparse COO matrix of a sparse-dense matmul (`mm(S, D)`, `mm(D, S)`, `addmm(t, S, D)`), else None."""
    if func is aten.mm.default:
        if len(args) < 2 or (is_sparse(args[0]) and is_sparse(args[1])):
            return None  # sparse @ sparse: _sparse_sparse_matmul, not modelled
        matrix = args[0] if is_sparse(args[0]) else args[1]
    else:
        matrix = args[1] if len(args) > 1 else None
    if is_sparse(matrix) and matrix.sparse_dim() == 2 and matrix.dense_dim() == 0:
        return matrix
    return None


def is_sparse(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.layout == torch.sparse_coo


def has_sparse(args: tuple, kwargs: dict) -> bool:
    return any(is_sparse(a) for a in args) or any(is_sparse(v) for v in kwargs.values())


def _alpha(args: tuple, kwargs: dict) -> Any:
    return args[2] if len(args) > 2 else kwargs.get("alpha", 1)


def _rows_view(dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
    """The dense tensor as (rows of the sparse dims, the rest): what index_add_ adds the value rows into."""
    return dense.view(math.prod(dense.shape[:sparse.sparse_dim()]), -1)


def _flat_indices(sparse: torch.Tensor) -> torch.Tensor:
    """flatten_indices (SparseTensorUtils.cpp): one sparse dim is its row of indices, no kernel; more are
    combined as a dot with the sizes' strides (a mul and a sum)."""
    indices = sparse._indices()
    if sparse.sparse_dim() == 1:
        return indices.squeeze(0)
    strides = [1] * sparse.sparse_dim()
    for d in range(sparse.sparse_dim() - 2, -1, -1):
        strides[d] = strides[d + 1] * sparse.shape[d + 1]
    return (indices * torch.tensor(strides, device=indices.device).unsqueeze(1)).sum(0)


def coo(indices: torch.Tensor, values: torch.Tensor, size, coalesced: bool) -> torch.Tensor:
    """A sparse COO tensor aliasing `indices` (sparse dims x nnz) and `values` (nnz x dense dims), as
    _sparse_coo_tensor_unsafe makes it (no kernel, no check)."""
    return aten._sparse_coo_tensor_with_dims_and_tensors.default(
        indices.shape[0], values.dim() - 1, list(size), indices, values, dtype=values.dtype,
        layout=torch.sparse_coo, device=values.device, is_coalesced=coalesced)


def _embedding_bag_sparse_backward(args: tuple, kwargs: dict) -> torch.Tensor:
    """What _embedding_bag_backward's kernel runs for sparse=True (EmbeddingBag.cpp): promoteIndicesAndOffsets
    (the narrower index dtype converted), then _embedding_bag_sparse_backward's CompositeImplicit formula."""
    names = ("grad", "indices", "offsets", "offset2bag", "bag_size", "maximum_indices", "num_weights",
             "scale_grad_by_freq", "mode", "sparse", "per_sample_weights", "padding_idx")
    bound = dict(zip(names, args)) | kwargs
    indices, offsets = bound["indices"], bound["offsets"]
    if indices.dtype != offsets.dtype:
        wide = torch.promote_types(indices.dtype, offsets.dtype)
        indices, offsets = indices.to(wide), offsets.to(wide)
    return aten._embedding_bag_sparse_backward.default.decompose(
        bound["grad"], indices, offsets, bound["offset2bag"], bound["bag_size"], bound["num_weights"],
        bound["scale_grad_by_freq"], bound["mode"], bound.get("per_sample_weights"), bound.get("padding_idx", -1))


def _scalar_name(dtype: torch.dtype) -> str:
    """c10's ScalarType name, as its dispatch errors print it: Half, BFloat16, Float, ..."""
    return {torch.float16: "Half", torch.bfloat16: "BFloat16"}.get(dtype, str(dtype).removeprefix("torch."))


def _addmm_sparse_dense(t: torch.Tensor, sparse: torch.Tensor, dense: torch.Tensor, beta: Any,
                        alpha: Any) -> torch.Tensor:
    """s_addmm_out_sparse_dense_cuda's ops (module docstring), run on fake tensors and recorded: beta * t +
    alpha * sparse @ dense, (m, n) row-major."""
    m, k, n = sparse.shape[0], sparse.shape[1], dense.shape[1]
    # s_addmm_out_sparse_dense_cuda's checks, in its order
    if device_type(sparse) != "cuda" or device_type(dense) != "cuda" or device_type(t) != "cuda":
        raise RuntimeError("Expected all tensors to be on the same device. addmm: expected 'mat1', 'mat2' and "
                           "'self' to be CUDA tensors")
    if dense.shape[0] != k:
        raise RuntimeError(f"addmm: Argument #3 (dense): Expected dim 0 size {k}, got {dense.shape[0]}")
    out = torch.empty((m, n), dtype=dense.dtype, device=dense.device)
    # coalesce() is CompositeImplicit; called here, below autograd, it reaches FakeTensorMode whole, which has no
    # sparse kernel for it: its CUDA op is called instead (the recorder's coalesce handler)
    coalesced = sparse if sparse.is_coalesced() else aten._coalesce.default(sparse)
    if coalesced._nnz() == 0:
        return torch.mul(t.expand(m, n), beta, out=out)
    if sparse.dtype not in SPMM_DTYPES:  # the worker's dtype dispatch, after the empty case: half / bfloat16
        raise RuntimeError(f'"addmm_sparse_cuda" not implemented for \'{_scalar_name(sparse.dtype)}\'')
    indices = coalesced._indices()
    crow = torch._convert_indices_from_coo_to_csr(indices[0].to(torch.int32), m, out_int32=True)
    col = indices[1].to(torch.int32)
    if beta == 0:
        out.zero_()
    else:
        out.copy_(t.expand(m, n))
    column_major = out.stride(0) == 1 and out.stride(1) == m
    work = out if column_major else out.t().clone(memory_format=torch.contiguous_format).t()
    values = coalesced._values()  # alpha scales inside cuSPARSE
    # SparseBlasLegacy.cpp: used as it is when column- or row-major with no gaps, else copied contiguous
    packed = (dense.stride(0) == 1 and dense.stride(1) == dense.shape[0]) or \
        (dense.stride(1) == 1 and dense.stride(0) == dense.shape[1])
    cusparse_spmm_op()(crow, col, values, dense if packed else dense.contiguous(), work, float(beta != 0))
    if work is not out:
        out.copy_(work)
    return out


class SparseCuda:
    """Runs the sparse ops of a step as CUDA does (see the module docstring), through the recorder.

    `run_children(func, args, kwargs, body)` records `func` as a decomposed op and runs `body()` with the
    recorder in force, so the ops it calls are recorded as its children; `note(text)` adds a capture note."""

    def __init__(self, run_children: Callable, note: Callable[[str], None], hints: Any) -> None:
        self._run_children = run_children
        self._note = note
        self._hints = hints
        # sparse tensors known to hold distinct coordinates: a coalesced tensor transposed (a transpose permutes
        # coordinates, it cannot make two equal), so their coalesce keeps every row and needs no assumption
        self._distinct = WeakIdKeyDictionary()

    # -- the recorder's entry points ------------------------------------------------------------------------
    def handles(self, func, args: tuple, kwargs: dict) -> bool:
        if func in SPARSE_ADDS:  # dense + sparse, or sparse + sparse
            return len(args) > 1 and is_sparse(args[1])
        if func is aten.sparse_mask.default:  # a dense tensor and a sparse one
            return len(args) > 1 and is_sparse(args[1]) and not is_sparse(args[0])
        if func is aten._embedding_bag_backward.default:
            return bool(args[EMBEDDING_BAG_SPARSE_ARG] if len(args) > EMBEDDING_BAG_SPARSE_ARG
                        else kwargs.get("sparse"))
        if func in SPARSE_MATMULS:
            return _sparse_matrix(func, args) is not None
        if func in SPARSE_TRANSPOSES or func in (aten._to_copy.default, aten._to_dense.default):
            return bool(args) and is_sparse(args[0])
        if func in SPARSE_MULS:  # a sparse tensor times a number (mul_out_sparse_zerodim)
            return len(args) > 1 and is_sparse(args[0]) and _is_number(args[1])
        return func is aten.clone.default and bool(args) and is_sparse(args[0])

    def run(self, func, args: tuple, kwargs: dict) -> Any:
        if func is aten._embedding_bag_backward.default:
            return self._run_children(func, args, kwargs, lambda: _embedding_bag_sparse_backward(args, kwargs))
        if func in SPARSE_ADDS:
            return self._add_dense_sparse(func, args, kwargs)
        if func in SPARSE_MATMULS:
            return self._sparse_matmul(func, args, kwargs)
        if func in SPARSE_TRANSPOSES:
            return self._transpose(func, args, kwargs)
        if func is aten._to_copy.default:
            return self._to_copy(func, args, kwargs)
        if func is aten._to_dense.default:
            return self._to_dense(func, args, kwargs)
        if func in SPARSE_MULS:
            return self._mul_number(func, args, kwargs)
        if func is aten.sparse_mask.default:
            return self._sparse_mask(func, args, kwargs)
        return self._clone(func, args, kwargs)

    # -- the ops ----------------------------------------------------------------------------------------------
    def _add_sparse_sparse(self, func, args: tuple, kwargs: dict) -> torch.Tensor:
        """add_out_sparse_cuda: the indices and the values of both concatenated (two cat kernels; the values
        scaled first when alpha is not 1), uncoalesced. In place, the capture records those kernels but keeps
        the left tensor's rows (a fake sparse tensor is not resized in place), and says so."""
        left, right, alpha = args[0], args[1], _alpha(args, kwargs)

        def body():
            values = right._values() if alpha == 1 else right._values() * alpha
            summed = coo(torch.cat([left._indices(), right._indices()], 1), torch.cat([left._values(), values]),
                         left.shape, False)
            return left if func is aten.add_.Tensor else summed

        if func is aten.add_.Tensor:
            self._note(SPARSE_ACCUMULATE_NOTE)
        return self._run_children(func, args, kwargs, body)

    def _add_dense_sparse(self, func, args: tuple, kwargs: dict) -> torch.Tensor:
        dense, sparse, alpha = args[0], args[1], _alpha(args, kwargs)
        if is_sparse(dense):
            return self._add_sparse_sparse(func, args, kwargs)

        def body():
            out = dense if func is aten.add_.Tensor else dense.clone()
            if sparse._nnz() == 0:
                return out
            values = sparse._values()
            # A coalesced tensor takes sparseElementwiseKernel instead: the same rows, one work item, recorded
            # as the index_add_ (its own time is not modelled: 57-60 µs for 32768 rows measured, where
            # index_add_ took 5-25; optimizers build their updates uncoalesced and take index_add_).
            # (it reads the indices as they are: no flattening, so only an uncoalesced tensor's are flattened)
            index = sparse._indices().select(0, 0) if sparse.is_coalesced() else _flat_indices(sparse)
            _rows_view(out, sparse).index_add_(0, index, values.reshape(values.shape[0], -1), alpha=alpha)
            return out

        return self._run_children(func, args, kwargs, body)

    def _sparse_matmul(self, func, args: tuple, kwargs: dict) -> torch.Tensor:
        """mm(S, D) = _sparse_mm: a zero fill, then addmm(zeros, S, D, beta=0); mm(D, S) the same on the
        transposes, (S.t() @ D.t()).t() (SparseTensorMath.cpp _sparse_mm: S.t() is a sparse transpose, a copy);
        addmm / _sparse_addmm(t, S, D)."""
        if func is aten.mm.default and is_sparse(args[0]):
            sparse, dense = args[0], args[1]

            def body():
                zeros = torch.zeros((sparse.shape[0], dense.shape[1]), dtype=dense.dtype, device=dense.device)
                return _addmm_sparse_dense(zeros, sparse, dense, 0, 1)
        elif func is aten.mm.default:
            dense, sparse = args[0], args[1]

            def body():
                zeros = torch.zeros((dense.shape[0], sparse.shape[1]), dtype=dense.dtype, device=dense.device)
                return _addmm_sparse_dense(zeros.t(), sparse.t(), dense.t(), 0, 1).t()
        else:
            names = ("self", "mat1", "mat2", "beta", "alpha")
            bound = dict(zip(names, args)) | kwargs
            beta, alpha = bound.get("beta", 1), bound.get("alpha", 1)

            def body():
                return _addmm_sparse_dense(bound["self"], bound["mat1"], bound["mat2"], beta, alpha)

        return self._run_children(func, args, kwargs, body)

    def _to_copy(self, func, args: tuple, kwargs: dict) -> torch.Tensor:
        """`.to(dtype)` / `.half()` / `.to(device)` of a COO tensor (TensorConversions.cpp _to_copy): its indices
        and values copied (the values converted), then aliased into a new COO tensor of the same coalescedness."""
        sparse = args[0]
        dtype = kwargs.get("dtype") or sparse.dtype
        device = kwargs.get("device") or sparse.device
        copy_kwargs = {"non_blocking": bool(kwargs.get("non_blocking", False))}
        if kwargs.get("memory_format") not in (None, torch.preserve_format):
            raise RuntimeError("to(options): COO only supports memory format Preserve")
        if kwargs.get("layout") not in (None, torch.sparse_coo):
            raise RuntimeError("to(options) doesn't support converting to a different layout")

        def body():
            indices = sparse._indices().to(device=device, copy=True, **copy_kwargs)
            values = sparse._values().to(device=device, dtype=dtype, copy=True, **copy_kwargs)
            return coo(indices, values, sparse.shape, sparse.is_coalesced())

        return self._run_children(func, args, kwargs, body)

    def _to_dense(self, func, args: tuple, kwargs: dict) -> torch.Tensor:
        """to_dense of a COO tensor (SparseTensor.cpp sparse_to_dense): a zeroed dense tensor, then dense += sparse
        (add_out_dense_sparse_cuda, above)."""
        sparse = args[0]
        if (args[1] if len(args) > 1 else kwargs.get("dtype")) is not None:
            raise RuntimeError("dtype argument is not supported by sparse_to_dense")

        def body():
            return torch.zeros(sparse.shape, dtype=sparse.dtype, device=sparse.device).add_(sparse)

        return self._run_children(func, args, kwargs, body)

    def _mul_number(self, func, args: tuple, kwargs: dict) -> torch.Tensor:
        """A COO tensor times a number (SparseTensorMath.cpp mul_out_sparse_zerodim): its indices copied and its
        values multiplied; the result keeps the input's coalescedness."""
        sparse, number = args[0], args[1]

        def body():
            return coo(sparse._indices().clone(), sparse._values() * number, sparse.shape, sparse.is_coalesced())

        return self._run_children(func, args, kwargs, body)

    def _transpose(self, func, args: tuple, kwargs: dict) -> torch.Tensor:
        """transpose of a COO tensor (TensorShape.cpp): a clone, then sparse_transpose_ swaps the two rows of
        indices through a zeroed temporary (three copies) and marks the result uncoalesced."""
        sparse = args[0]
        if func is aten.t.default:
            dims = (0, 1) if sparse.dim() == 2 else (0, 0)  # t() of a 1-D tensor: a clone
        else:
            dims = tuple(d % sparse.dim() for d in args[1:3])
        if dims[0] != dims[1] and max(dims) >= sparse.sparse_dim():
            raise RuntimeError(f"transpose of a sparse COO tensor: transposed dimensions must be sparse (got "
                               f"dims {dims[0]} and {dims[1]}, {sparse.sparse_dim()} sparse dims)")

        def body():
            indices, values = sparse._indices().clone(), sparse._values().clone()
            if dims[0] == dims[1]:
                return coo(indices, values, sparse.shape, sparse.is_coalesced())
            row0, row1 = indices.select(0, dims[0]), indices.select(0, dims[1])
            tmp = torch.zeros_like(row0)
            tmp.copy_(row0)
            row0.copy_(row1)
            row1.copy_(tmp)
            size = list(sparse.shape)
            size[dims[0]], size[dims[1]] = size[dims[1]], size[dims[0]]
            out = coo(indices, values, size, False)
            if sparse.is_coalesced():
                self._distinct[out] = True
            return out

        return self._run_children(func, args, kwargs, body)

    def _sparse_mask(self, func, args: tuple, kwargs: dict) -> torch.Tensor:
        dense, mask = args[0], args[1]

        def body():
            indices = mask._indices()
            torch.ones((1,), dtype=dense.dtype, device=dense.device)
            rows = dense[tuple(indices)]
            values = rows * 1  # the ones, expanded over the mask's values
            return coo(indices.clone(), values, dense.shape, mask.is_coalesced())

        return self._run_children(func, args, kwargs, body)

    def _clone(self, func, args: tuple, kwargs: dict) -> torch.Tensor:
        sparse = args[0]
        if self._stolen_by_accumulate_grad(sparse):
            return coo(sparse._indices(), sparse._values(), sparse.shape, sparse.is_coalesced())

        def body():
            return coo(sparse._indices().clone(), sparse._values().clone(), sparse.shape, sparse.is_coalesced())

        return self._run_children(func, args, kwargs, body)

    def coalesce(self, func, args: tuple, kwargs: dict) -> tuple[torch.Tensor, str | None]:
        """A sync handler for `_coalesce`: the coalesced tensor, with as many rows as distinct indices."""
        sparse = args[0]
        nnz = sparse._nnz()
        indices, values = sparse._indices(), sparse._values()
        # distinct indices cannot outnumber the positions of the sparse dims
        distinct = min(nnz, math.prod(sparse.shape[:sparse.sparse_dim()]))
        known = self._hints.use(indices) if self._hints else None
        if known is not None and known.dim() == 2:
            distinct = int(torch.unique(known, dim=1).shape[1])
        elif nnz > 1 and sparse not in self._distinct:
            self._note(COALESCE_NOTE)
        out = coo(indices.new_empty((indices.shape[0], distinct)), values.new_empty((distinct, *values.shape[1:])),
                  sparse.shape, True)
        on_gpu = device_type(indices) == "cuda"
        return out, ("coalesce" if on_gpu and nnz > 1 else None)

    @staticmethod
    def _stolen_by_accumulate_grad(sparse: torch.Tensor) -> bool:
        """AccumulateGrad's Case 1.2: grad mode off, the leaf has no gradient yet, contiguous indices and
        values (their use counts, which the capture inflates, are taken as a fresh backward leaves them)."""
        node = torch._C._current_autograd_node()
        if node is None or node.name() != ACCUMULATE_GRAD_NODE or torch.is_grad_enabled():
            return False
        variable = getattr(node, "variable", None)
        return (variable is not None and variable.grad is None and sparse._indices().is_contiguous()
                and sparse._values().is_contiguous())
