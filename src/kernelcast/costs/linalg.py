"""Dense linear algebra on CUDA: LU solves, Cholesky, QR, eigen- and singular-value decompositions.

FLOPs follow LAPACK's operation counts (LAWN 41; Golub & Van Loan, Matrix Computations, 4th ed., tables
5.5.1 and 8.6.1): multiply-adds count two, lower-order terms dropped. torch.utils.flop_counter has no formula
for these ops, so there is nothing to compare with.

Work items. What decides them is in torch's aten/src/ATen/native/cuda/linalg/BatchLinearAlgebra.cpp and
BatchLinearAlgebraLib.cpp (torch 2.11):
- lu_factor: `m != n || batch == 1 || m >= 512` -> cuSOLVER getrf once per matrix (looped), else cuBLAS
  getrfBatched once. (Later torch replaces the 512 cut-off by a batch-aware threshold, PR #185344.)
- lu_solve (lu_solve_kernel, the heuristic of PR #72935): n == k: cuBLAS batched for n <= 16, else two
  triangular solves; otherwise n <= 8: cuBLAS getrsBatched; n <= 64: cuSOLVER getrs per matrix when
  batch <= 2 and (k <= 64 or transposed or n <= 32), else batched for k <= 8, else triangular; n <= 128:
  looped for batch <= 2 and k <= 2, batched for k <= 2, else triangular; n > 128: triangular. The triangular
  path is the permutation (arange, unpack_pivots), two out-of-place scatters (or a clone and a scatter_ when
  transposed) and two trsm (lu_solve_triangular_items).
- structured kernels copy their input into a column-major working copy first (one copy), and
  linalg_lu_solve copies B into the result first (one copy, a memcpy when layouts agree).
Measured (H200, torch 2.11, zoo linalg_solve: ten 30x30 fp32 solves, one right-hand side): cuSOLVER's
getrf runs GETRF_ITEMS_MEASURED work items per matrix (set-info kernel, a memset, panel pivoting, pivot
conversions), getrs GETRS_ITEMS_MEASURED (info copy, row swaps, two triangular solves with their
initialisers), lu_solve's info buffer one fill. Those two counts hold for n <= 32 (one panel) and one
right-hand side; larger n (more panels) and several right-hand sides are ASSUMED to launch the same.
Every other cuSOLVER / cuBLAS call is ASSUMED to be SOLVER_CALL_ITEMS_ASSUMED work item (their kernels are
closed source and were not measured).

Where the rule holds: the measured counts (the 30x30 solve: 16 items per _linalg_solve_ex, 3 per check) hold
for one-panel (n <= 32) single-matrix solves with one right-hand side; the path choice holds for torch 2.11's
default backend (cuSOLVER/cuBLAS; torch.backends.cuda.preferred_linalg_library("magma") or a ROCm build take
other paths, not modelled), and larger or batched problems take the paths above with ASSUMED item counts per
closed-source library call.

Host syncs: `_linalg_check_errors` reads the info tensor back (`infos.any().item()`, BatchLinearAlgebra.cpp)
on every call on a device tensor, so it is a sync point (capture/recorder.py) costing an `any` (a cast and a
copy for one matrix; a reduce for a batch) and a device-to-host memcpy. torch.linalg.solve / inv / cholesky /
lu_factor / ldl_factor call it after their *_ex op; the *_ex ops with check_errors=True, and _linalg_eigh,
_linalg_svd, linalg_eig, linalg_lstsq, cholesky and linalg_pinv call it inside (their formulas count its items;
the recorder marks them as syncs). cholesky_inverse checks a CPU info: no readback.
"""

from __future__ import annotations

import math

from kernelcast.records import OpRecord, TensorMeta

from .common import arg, bytes_read, bytes_written
from .reduce_config import REDUCE_SEMAPHORE_MEMSETS, is_global_reduce
from .registry import Cost, CostContext, register

GETRF_ITEMS_MEASURED = 7  # cusolverDnXgetrf, n <= 32, per matrix
GETRS_ITEMS_MEASURED = 6  # cusolverDnXgetrs, one right-hand side, per matrix
SOLVER_CALL_ITEMS_ASSUMED = 1  # any other cuSOLVER / cuBLAS call: not measured
COPY_KERNELS = 1  # a working copy (cloneBatchedColumnMajor, result.copy_(B))
FILL_KERNELS = 1  # at::zeros / fill_ / zero_
SCATTER_KERNELS = 1  # scatter_
LU_FACTOR_CUSOLVER_MIN_N = 512  # torch 2.11's cut-off: at or above it, square batches loop cuSOLVER too
LU_SOLVE_BATCHED_MAX_N = 8
LU_SOLVE_SQUARE_BATCHED_MAX_N = 16
LU_SOLVE_LOOPED_MAX_N = 64
LU_SOLVE_LOOPED_MAX_K = 64
LU_SOLVE_LOOPED_ALWAYS_N = 32
LU_SOLVE_LOOPED_MAX_BATCH = 2
LU_SOLVE_MID_MAX_N = 128
LU_SOLVE_MID_MAX_K = 2
LU_SOLVE_BATCHED_MAX_K = 8
# lu_solve by two triangular solves (lu_solve_triangular in cuda/linalg/BatchLinearAlgebra.cpp): the
# permutation from an arange (expanded and made contiguous, a copy, for a batch) and unpack_pivots; then
# NoTranspose: an arange, two out-of-place scatters (inverse permutation, B1 = P^T B: a clone and a scatter_
# each), two trsm; (conj-)transposed: two trsm, then B.clone() and scatter_.
ARANGE_KERNELS = 1
UNPACK_PIVOTS_KERNELS = 1
OUT_OF_PLACE_SCATTER_KERNELS = 2  # Tensor.scatter: clone, then scatter_
TRIANGULAR_SOLVES = 2
CHECK_CAST_ITEMS = 1  # infos.any() on one int32: .to(kBool), then a copy into the result (ReduceOps.cpp)
CHECK_COPY_ITEMS = 1
D2H_MEMCPY_ITEMS = 1


# -- FLOPs (LAPACK operation counts, leading terms) ----------------------------------------------------------
def getrf_flops(m: int, n: int) -> float:
    """LU with partial pivoting of an m x n matrix: m*n^2 - n^3/3 for m >= n (2n^3/3 square)."""
    if m < n:
        return float(n * m * m - m ** 3 / 3)
    return float(m * n * n - n ** 3 / 3)


def trsm_flops(n: int, k: int) -> float:
    """A triangular n x n system with k right-hand sides: n^2 * k."""
    return float(n * n * k)


def getrs_flops(n: int, k: int) -> float:
    """Solve with an LU factorization: two triangular solves, 2 * n^2 * k."""
    return 2.0 * trsm_flops(n, k)


def potrf_flops(n: int) -> float:
    """Cholesky: n^3 / 3."""
    return n ** 3 / 3


def geqrf_flops(m: int, n: int) -> float:
    """Householder QR: 2*m*n^2 - 2n^3/3 (m >= n); the transpose's count for m < n."""
    if m < n:
        m, n = n, m
    return 2.0 * m * n * n - 2.0 * n ** 3 / 3


def orgqr_flops(m: int, n: int, k: int) -> float:
    """Form Q (m x n) from k reflectors: 4mnk - 2(m + n)k^2 + 4k^3/3."""
    return max(4.0 * m * n * k - 2.0 * (m + n) * k * k + 4.0 * k ** 3 / 3, 0.0)


def ormqr_flops(m: int, n: int, k: int) -> float:
    """Apply k reflectors to an m x n matrix: 4mnk - 2nk^2."""
    return max(4.0 * m * n * k - 2.0 * n * k * k, 0.0)


SYEVD_VALUES_FLOPS_PER_N3 = 4 / 3  # tridiagonal reduction dominates (Golub & Van Loan, 8.3)
SYEVD_VECTORS_FLOPS_PER_N3 = 9.0
GEEV_VALUES_FLOPS_PER_N3 = 10.0  # Hessenberg reduction + QR iterations (Golub & Van Loan, 7.5.6)
GEEV_VECTORS_FLOPS_PER_N3 = 25.0


def syevd_flops(n: int, vectors: bool) -> float:
    return (SYEVD_VECTORS_FLOPS_PER_N3 if vectors else SYEVD_VALUES_FLOPS_PER_N3) * n ** 3


def geev_flops(n: int, vectors: bool) -> float:
    return (GEEV_VECTORS_FLOPS_PER_N3 if vectors else GEEV_VALUES_FLOPS_PER_N3) * n ** 3


def gesvd_flops(m: int, n: int, vectors: bool) -> float:
    """Golub-Reinsch SVD (m >= n): values 4mn^2 - 4n^3/3; with thin U and V, 6mn^2 + 20n^3 (GVL table 8.6.1)."""
    if m < n:
        m, n = n, m
    return 6.0 * m * n * n + 20.0 * n ** 3 if vectors else 4.0 * m * n * n - 4.0 * n ** 3 / 3


# -- shapes ----------------------------------------------------------------------------------------------------
def batch_of(t: TensorMeta) -> int:
    """Matrices in a (..., m, n) tensor."""
    return math.prod(t.shape[:-2]) if len(t.shape) > 2 else 1


def _matrix(op: OpRecord, *names: str) -> TensorMeta:
    for name in names:
        value = op.args.get(name)
        if isinstance(value, TensorMeta):
            return value
    raise TypeError(f"{op.op}: none of {names} is a tensor")


# A linalg cost's key: (SOLVER_KEY, aten op, n, matrices), by which a calibrated model looks its time up in the
# profile's measured table (predict/linalg_time.py): cuSOLVER's small factorizations are latency-bound chains of
# panel kernels, far from their FLOPs' roofline.
SOLVER_KEY = "solver"


def solver_key(op: OpRecord, t: TensorMeta) -> tuple:
    """(SOLVER_KEY, the aten op without its overload, n: the matrix's last dim, the matrices in the batch)."""
    return (SOLVER_KEY, op.packet, t.shape[-1] if t.shape else 1, batch_of(t))


def _solver_cost(op: OpRecord, flops: float, kernels: int, t: TensorMeta) -> Cost:
    return Cost(flops=flops, bytes_read=bytes_read(op), bytes_written=bytes_written(op), kernels=kernels,
                dtype=t.dtype, kind="linalg", key=solver_key(op, t))


# -- kernel counts by path ---------------------------------------------------------------------------------------
def lu_factor_items(batch: int, m: int, n: int) -> int:
    """cuSOLVER getrf per matrix (looped) or one cuBLAS getrfBatched, by torch 2.11's rule."""
    if m != n or batch == 1 or m >= LU_FACTOR_CUSOLVER_MIN_N:
        return batch * GETRF_ITEMS_MEASURED
    return SOLVER_CALL_ITEMS_ASSUMED


def lu_solve_triangular_items(batch: int, adjoint: bool) -> int:
    """lu_solve_triangular's work items (see the constants above); each trsm ASSUMED one item."""
    permutation = ARANGE_KERNELS + COPY_KERNELS * (batch > 1) + UNPACK_PIVOTS_KERNELS
    solves = TRIANGULAR_SOLVES * SOLVER_CALL_ITEMS_ASSUMED
    if adjoint:
        return permutation + solves + COPY_KERNELS + SCATTER_KERNELS
    return permutation + ARANGE_KERNELS + 2 * OUT_OF_PLACE_SCATTER_KERNELS + solves


def lu_solve_items(batch: int, n: int, k: int, adjoint: bool = False) -> int:
    """lu_solve_kernel's choice (NoTranspose unless `adjoint`): batched cuBLAS, looped cuSOLVER getrs (plus
    its info fill), or two triangular solves."""
    looped = 1 * FILL_KERNELS + batch * GETRS_ITEMS_MEASURED
    triangular = lu_solve_triangular_items(batch, adjoint)
    if n == k:
        return SOLVER_CALL_ITEMS_ASSUMED if n <= LU_SOLVE_SQUARE_BATCHED_MAX_N else triangular
    if n <= LU_SOLVE_BATCHED_MAX_N:
        return SOLVER_CALL_ITEMS_ASSUMED
    if n <= LU_SOLVE_LOOPED_MAX_N:
        if batch <= LU_SOLVE_LOOPED_MAX_BATCH and (k <= LU_SOLVE_LOOPED_MAX_K or adjoint
                                                   or n <= LU_SOLVE_LOOPED_ALWAYS_N):
            return looped
        return SOLVER_CALL_ITEMS_ASSUMED if k <= LU_SOLVE_BATCHED_MAX_K else triangular
    if n <= LU_SOLVE_MID_MAX_N:
        if batch <= LU_SOLVE_LOOPED_MAX_BATCH and k <= LU_SOLVE_MID_MAX_K:
            return looped
        return SOLVER_CALL_ITEMS_ASSUMED if k <= LU_SOLVE_MID_MAX_K else triangular
    return triangular


def check_errors_items(info_numel: int, ctx: CostContext) -> int:
    """`infos.any().item()`: any() of one element is a cast and a copy; of more, one reduce kernel (plus its
    semaphore memset when global); then the device-to-host copy of the bool."""
    if info_numel <= 1:
        any_items = CHECK_CAST_ITEMS + CHECK_COPY_ITEMS
    else:
        any_items = 1 + REDUCE_SEMAPHORE_MEMSETS * is_global_reduce(
            1, info_numel, True, ctx.sm_count, ctx.max_threads_per_sm)
    return any_items + D2H_MEMCPY_ITEMS


def _rhs_columns(b: TensorMeta, a: TensorMeta) -> int:
    """Right-hand sides per matrix: B is (..., n, k), or a vector (..., n) when its dims are A's minus one."""
    vector = len(b.shape) == len(a.shape) - 1 or len(b.shape) == 1
    return 1 if vector else b.shape[-1]


# -- formulas ------------------------------------------------------------------------------------------------------
@register("aten._linalg_check_errors")
def linalg_check_errors(op: OpRecord, ctx: CostContext) -> Cost:
    info = arg(op, "info")
    if not info.on_gpu:
        return Cost(kernels=0)
    return Cost(bytes_read=float(info.nbytes), bytes_written=1.0, kernels=check_errors_items(info.numel, ctx),
                dtype="int32", kind="memcpy")


def _check_items(op: OpRecord, info_numel: int, ctx: CostContext) -> int:
    return check_errors_items(info_numel, ctx) if op.args.get("check_errors") else 0


@register("aten.linalg_lu_factor_ex")
def lu_factor_ex(op: OpRecord, ctx: CostContext) -> Cost:
    a = _matrix(op, "A")
    batch, (m, n) = batch_of(a), a.shape[-2:]
    kernels = COPY_KERNELS + lu_factor_items(batch, m, n) + _check_items(op, batch, ctx)
    return _solver_cost(op, batch * getrf_flops(m, n), kernels, a)


@register("aten.linalg_lu_solve")
def lu_solve(op: OpRecord, ctx: CostContext) -> Cost:
    lu, b = _matrix(op, "LU"), _matrix(op, "B")
    batch, n, k = max(batch_of(b), batch_of(lu)), lu.shape[-1], b.shape[-1]
    kernels = COPY_KERNELS + lu_solve_items(batch, n, k, bool(op.args.get("adjoint")))
    return _solver_cost(op, batch * getrs_flops(n, k), kernels, lu)


@register("aten._linalg_solve_ex")
def linalg_solve_ex(op: OpRecord, ctx: CostContext) -> Cost:
    """lu_factor_ex (copy + getrf), the optional check, then lu_solve (copy of B + getrs), as
    _linalg_solve_ex_out runs them (BatchLinearAlgebra.cpp). A contiguous real A is factored as A^T and solved
    with adjoint=True."""
    a, b = _matrix(op, "A"), _matrix(op, "B")
    batch, n = max(batch_of(a), batch_of(b) if len(b.shape) > 2 else 1), a.shape[-1]
    k = _rhs_columns(b, a)
    adjoint = not a.dtype.startswith("complex") and _row_major(a)
    kernels = (COPY_KERNELS + lu_factor_items(batch_of(a), n, n) + _check_items(op, batch_of(a), ctx)
               + COPY_KERNELS + lu_solve_items(batch, n, k, adjoint))
    return _solver_cost(op, batch_of(a) * getrf_flops(n, n) + batch * getrs_flops(n, k), kernels, a)


def _row_major(t: TensorMeta) -> bool:
    expected = 1
    for size, stride in zip(reversed(t.shape), reversed(t.stride)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


@register("aten.linalg_inv_ex")
def linalg_inv_ex(op: OpRecord, ctx: CostContext) -> Cost:
    """result.zero_(), its diagonal fill_(1), then linalg_solve_ex(A, I): LU of A and n right-hand sides."""
    a = _matrix(op, "A")
    batch, n = batch_of(a), a.shape[-1]
    kernels = (2 * FILL_KERNELS + COPY_KERNELS + lu_factor_items(batch, n, n) + _check_items(op, batch, ctx)
               + COPY_KERNELS + lu_solve_items(batch, n, n))
    return _solver_cost(op, batch * (getrf_flops(n, n) + getrs_flops(n, n)), kernels, a)


@register("aten._linalg_det", "aten._linalg_slogdet")
def linalg_det(op: OpRecord, ctx: CostContext) -> Cost:
    """lu_factor_ex of A, then the product (or log-sum) of the diagonal and the pivots' sign: ASSUMED two
    kernels after the factorization (a diagonal reduction and the sign from the pivots)."""
    a = _matrix(op, "A")
    batch, n = batch_of(a), a.shape[-1]
    kernels = COPY_KERNELS + lu_factor_items(batch, n, n) + 2 * SOLVER_CALL_ITEMS_ASSUMED
    return _solver_cost(op, batch * getrf_flops(n, n), kernels, a)


@register("aten.linalg_cholesky_ex", "aten.cholesky")
def cholesky(op: OpRecord, ctx: CostContext) -> Cost:
    """Copy into the result, fill info, potrf per matrix (ASSUMED one item; potrfBatched for a batch), then
    triu_/tril_ of the result."""
    a = _matrix(op, "self", "A")
    batch, n = batch_of(a), a.shape[-1]
    kernels = COPY_KERNELS + FILL_KERNELS + SOLVER_CALL_ITEMS_ASSUMED + 1 + _check_items(op, batch, ctx)
    return _solver_cost(op, batch * potrf_flops(n), kernels, a)


@register("aten.cholesky_solve", "aten._cholesky_solve_helper")
def cholesky_solve(op: OpRecord, ctx: CostContext) -> Cost:
    """Working copy of B, then potrs (one matrix) or two triangular solves (a batch)."""
    b, a = _matrix(op, "self"), _matrix(op, "A")
    batch, n, k = batch_of(b), a.shape[-1], b.shape[-1]
    solves = SOLVER_CALL_ITEMS_ASSUMED if batch == 1 else 2 * SOLVER_CALL_ITEMS_ASSUMED
    return _solver_cost(op, batch * getrs_flops(n, k), COPY_KERNELS + solves, a)


@register("aten.cholesky_inverse")
def cholesky_inverse(op: OpRecord, ctx: CostContext) -> Cost:
    """cholesky_inverse_out_info copies the input into the result; the cuSOLVER path
    (_cholesky_inverse_cusolver_potrs_based) clones a column-major working copy, zeroes a device info, fills
    the result with the identity (fill_(0), then the diagonal fill_(1)) and solves with n right-hand sides
    (potrs per matrix, ASSUMED one item; potrsBatched for a batch). Its info check reads a CPU tensor (MAGMA's
    convention), so there is no device readback and no sync."""
    a = _matrix(op, "self")
    batch, n = batch_of(a), a.shape[-1]
    solves = batch * SOLVER_CALL_ITEMS_ASSUMED if batch == 1 else SOLVER_CALL_ITEMS_ASSUMED
    kernels = 2 * COPY_KERNELS + 3 * FILL_KERNELS + solves
    return _solver_cost(op, batch * getrs_flops(n, n), kernels, a)


@register("aten.linalg_solve_triangular", "aten.triangular_solve")
def triangular_solve(op: OpRecord, ctx: CostContext) -> Cost:
    """Copy of B (and of A when it is not column-major), then cuBLAS trsm: per matrix for batch <= 8 and
    n >= 64, else trsmBatched (ASSUMED one item each)."""
    a = _matrix(op, "A") if op.op.startswith("aten.triangular_solve") else _matrix(op, "self")
    b = _matrix(op, "self") if op.op.startswith("aten.triangular_solve") else _matrix(op, "B")
    batch, n, k = max(batch_of(a), batch_of(b)), a.shape[-1], b.shape[-1]
    looped = batch <= 8 and n >= 64
    solves = batch * SOLVER_CALL_ITEMS_ASSUMED if looped else SOLVER_CALL_ITEMS_ASSUMED
    return _solver_cost(op, batch * trsm_flops(n, k), 2 * COPY_KERNELS + solves, a)


@register("aten.geqrf")
def geqrf(op: OpRecord, ctx: CostContext) -> Cost:
    """Working copy, then batched cuBLAS geqrf for m <= 256 and batch >= max(2, m/16), else cuSOLVER per
    matrix (ASSUMED one item per call)."""
    a = _matrix(op, "self")
    batch, (m, n) = batch_of(a), a.shape[-2:]
    calls = 1 if m <= 256 and batch >= max(2, m // 16) else batch
    return _solver_cost(op, batch * geqrf_flops(m, n), COPY_KERNELS + calls * SOLVER_CALL_ITEMS_ASSUMED, a)


@register("aten.linalg_householder_product", "aten.orgqr")
def householder_product(op: OpRecord, ctx: CostContext) -> Cost:
    a = _matrix(op, "input", "self")
    batch, (m, n) = batch_of(a), a.shape[-2:]
    k = _matrix(op, "tau", "input2").shape[-1]
    return _solver_cost(op, batch * orgqr_flops(m, n, k), COPY_KERNELS + batch * SOLVER_CALL_ITEMS_ASSUMED, a)


@register("aten.ormqr")
def ormqr(op: OpRecord, ctx: CostContext) -> Cost:
    c = _matrix(op, "input3")
    k = _matrix(op, "input2").shape[-1]
    batch, (m, n) = batch_of(c), c.shape[-2:]
    return _solver_cost(op, batch * ormqr_flops(m, n, k), COPY_KERNELS + batch * SOLVER_CALL_ITEMS_ASSUMED, c)


@register("aten.linalg_qr")
def linalg_qr(op: OpRecord, ctx: CostContext) -> Cost:
    """geqrf, then R = triu of the factor, and (modes reduced/complete) Q from orgqr."""
    a = _matrix(op, "A")
    batch, (m, n) = batch_of(a), a.shape[-2:]
    k = min(m, n)
    with_q = op.args.get("mode", "reduced") != "r"
    flops = geqrf_flops(m, n) + (orgqr_flops(m, m if op.args.get("mode") == "complete" else k, k) if with_q else 0)
    kernels = COPY_KERNELS + batch * SOLVER_CALL_ITEMS_ASSUMED + 1 + (
        COPY_KERNELS + batch * SOLVER_CALL_ITEMS_ASSUMED if with_q else 0)
    return _solver_cost(op, batch * flops, kernels, a)


@register("aten._linalg_eigh")
def linalg_eigh(op: OpRecord, ctx: CostContext) -> Cost:
    """Copy into the eigenvector output, info zeros, syevd per matrix (or syevjBatched: ASSUMED one item per
    matrix either way), then the info check (a host sync: recorder)."""
    a = _matrix(op, "A")
    batch, n = batch_of(a), a.shape[-1]
    vectors = bool(op.args.get("compute_v", True))
    kernels = COPY_KERNELS + FILL_KERNELS + batch * SOLVER_CALL_ITEMS_ASSUMED + check_errors_items(batch, ctx)
    return _solver_cost(op, batch * syevd_flops(n, vectors), kernels, a)


@register("aten.linalg_eig", "aten._linalg_eigvals")
def linalg_eig(op: OpRecord, ctx: CostContext) -> Cost:
    """cuSOLVER Xgeev per matrix (torch >= 2.9; ASSUMED one item each) on a working copy, info zeros, then
    the info check (a host sync: recorder)."""
    a = _matrix(op, "self")
    batch, n = batch_of(a), a.shape[-1]
    vectors = op.op.startswith("aten.linalg_eig.")
    kernels = COPY_KERNELS + FILL_KERNELS + batch * SOLVER_CALL_ITEMS_ASSUMED + check_errors_items(batch, ctx)
    return _solver_cost(op, batch * geev_flops(n, vectors), kernels, a)


@register("aten._linalg_svd")
def linalg_svd(op: OpRecord, ctx: CostContext) -> Cost:
    """Working copy, info zeros, gesvd/gesvdj per matrix (ASSUMED one item each), then the info check (a host
    sync: recorder)."""
    a = _matrix(op, "A")
    batch, (m, n) = batch_of(a), a.shape[-2:]
    vectors = bool(op.args.get("compute_uv", True))
    kernels = COPY_KERNELS + FILL_KERNELS + batch * SOLVER_CALL_ITEMS_ASSUMED + check_errors_items(batch, ctx)
    return _solver_cost(op, batch * gesvd_flops(m, n, vectors), kernels, a)


@register("aten.linalg_lstsq")
def linalg_lstsq(op: OpRecord, ctx: CostContext) -> Cost:
    """gels: geqrf, ormqr, trsm (BatchLinearAlgebra.cpp lstsq_kernel; batched cuBLAS gels for m <= 256 and
    enough matrices), working copies of A and B, then the info check (a host sync: recorder)."""
    a, b = _matrix(op, "self"), _matrix(op, "b")
    batch, (m, n), k = max(batch_of(a), batch_of(b)), a.shape[-2:], b.shape[-1] if len(b.shape) > 1 else 1
    flops = geqrf_flops(m, n) + ormqr_flops(max(m, n), k, min(m, n)) + trsm_flops(min(m, n), k)
    batched = m >= n and m <= 256 and batch >= max(2, m // 16)
    calls = 1 if batched else 3 * batch
    kernels = 2 * COPY_KERNELS + calls * SOLVER_CALL_ITEMS_ASSUMED + check_errors_items(batch, ctx)
    return _solver_cost(op, batch * flops, kernels, a)


@register("aten.linalg_ldl_factor_ex")
def ldl_factor_ex(op: OpRecord, ctx: CostContext) -> Cost:
    """Working copy, sytrf per matrix (ASSUMED one item each): n^3/3 like Cholesky."""
    a = _matrix(op, "self")
    batch, n = batch_of(a), a.shape[-1]
    kernels = COPY_KERNELS + batch * SOLVER_CALL_ITEMS_ASSUMED + _check_items(op, batch, ctx)
    return _solver_cost(op, batch * potrf_flops(n), kernels, a)


@register("aten.linalg_ldl_solve")
def ldl_solve(op: OpRecord, ctx: CostContext) -> Cost:
    ld, b = _matrix(op, "LD"), _matrix(op, "B")
    batch, n, k = max(batch_of(ld), batch_of(b)), ld.shape[-1], b.shape[-1]
    return _solver_cost(op, batch * getrs_flops(n, k), COPY_KERNELS + batch * SOLVER_CALL_ITEMS_ASSUMED, ld)


# lu_unpack (BatchLinearAlgebra.cpp, TORCH_IMPL_FUNC(lu_unpack_out)): triu_ and tril_ of the factor, the unit
# diagonal (fill_), then the permutation: an arange made contiguous over the batch, unpack_pivots, P.zero_()
# and P.scatter_ of ones.
LU_UNPACK_LU_KERNELS = 3  # triu, tril, diagonal fill_
LU_UNPACK_PIVOT_KERNELS = 4  # arange (+ contiguous copy for a batch), unpack_pivots, zero_, scatter_


def lu_unpack_items(batch: int, unpack_data: bool = True, unpack_pivots: bool = True) -> int:
    return (LU_UNPACK_LU_KERNELS * unpack_data
            + (LU_UNPACK_PIVOT_KERNELS + COPY_KERNELS * (batch > 1)) * unpack_pivots)


@register("aten.lu_unpack")
def lu_unpack(op: OpRecord, ctx: CostContext) -> Cost:
    lu = _matrix(op, "LU_data")
    items = lu_unpack_items(batch_of(lu), op.args.get("unpack_data", True) is not False,
                            op.args.get("unpack_pivots", True) is not False)
    return _solver_cost(op, 0.0, items, lu)


@register("aten.linalg_lu")
def linalg_lu(op: OpRecord, ctx: CostContext) -> Cost:
    """linalg_lu_factor_ex into L or U (its working copy and getrf), then lu_unpack (TORCH_IMPL_FUNC(linalg_lu_out))."""
    a = _matrix(op, "A")
    batch, (m, n) = batch_of(a), a.shape[-2:]
    pivot = op.args.get("pivot", True) is not False
    kernels = COPY_KERNELS + lu_factor_items(batch, m, n) + lu_unpack_items(batch, True, pivot)
    return _solver_cost(op, batch * getrf_flops(m, n), kernels, a)


# linalg_matrix_exp (LinearAlgebra.cpp, mexp / mexp_impl): for n > 1, the 1-norm of each matrix (abs, a sum over
# rows, a max) is copied to the host to pick the Taylor degree (a sync: capture/recorder.py), then the degree-18
# polynomial (compute_T18: 5 matmuls and the elementwise sums around them), then s squarings, s data-dependent
# (not counted). ASSUMED: the degree-18 path, MATRIX_EXP_T18_MATMULS products and MATRIX_EXP_T18_EXTRA_ITEMS
# elementwise kernels; 1 x 1 matrices are one exp kernel.
MATRIX_EXP_NORM_ITEMS = 4  # abs, sum, amax, .cpu() memcpy
MATRIX_EXP_T18_MATMULS = 5
MATRIX_EXP_T18_EXTRA_ITEMS = 8


@register("aten.linalg_matrix_exp")
def linalg_matrix_exp(op: OpRecord, ctx: CostContext) -> Cost:
    a = _matrix(op, "self")
    batch, n = batch_of(a), a.shape[-1]
    if n <= 1:
        return _solver_cost(op, float(batch), 1, a)
    kernels = MATRIX_EXP_NORM_ITEMS + MATRIX_EXP_T18_MATMULS + MATRIX_EXP_T18_EXTRA_ITEMS
    return _solver_cost(op, batch * MATRIX_EXP_T18_MATMULS * 2.0 * n ** 3, kernels, a)


# linalg_pinv (LinearAlgebra.cpp, CompositeExplicitAutogradNonFunctional): without hermitian, _linalg_svd
# (reduced), the tolerance max(atol, rtol * S[..., 0]) (mul, maximum), where(S > tol, 1 / S, 0) (gt, reciprocal,
# a 0-d zeros, where), Vh^H scaled by it (mul) and one matmul with U^H; with hermitian, _linalg_eigh and the
# same steps on |eigenvalues| (abs, amax). Both check their decomposition's info (a sync).
PINV_ELEMENTWISE_KERNELS = 7  # mul, maximum, gt, reciprocal, zeros, where, mul
PINV_HERMITIAN_EXTRA_KERNELS = 2  # abs, amax


@register("aten.linalg_pinv")
def linalg_pinv(op: OpRecord, ctx: CostContext) -> Cost:
    a = _matrix(op, "self")
    batch, (m, n) = batch_of(a), a.shape[-2:]
    k = min(m, n)
    hermitian = bool(op.args.get("hermitian"))
    decomposition = syevd_flops(n, True) if hermitian else gesvd_flops(m, n, True)
    factor_items = COPY_KERNELS + FILL_KERNELS + batch * SOLVER_CALL_ITEMS_ASSUMED + check_errors_items(batch, ctx)
    kernels = (factor_items + PINV_ELEMENTWISE_KERNELS + PINV_HERMITIAN_EXTRA_KERNELS * hermitian
               + SOLVER_CALL_ITEMS_ASSUMED)
    return _solver_cost(op, batch * (decomposition + 2.0 * n * k * m), kernels, a)
