"""The calibration's grids: sections not in the default run, each measuring one kind of kernel over a grid of shapes
where the default sections had too few (`kernelcast calibrate --sections NAME`; EXTRA_SECTIONS names them). Each
grid's comment says what it measures and which prediction it was made for.
"""

from __future__ import annotations

import itertools
import math

import torch

from kernelcast.measure import flush_l2

from .microbench import record_batch_norm, record_row_kernels
from .timing import DEV, aten, randn, record
from .triton_grid import triton_grid

# Row, column and whole-tensor reductions over a grid of shapes: the reduce kernel's speed depends on how many
# outputs share the GPU (few rows of long rows run far under bandwidth: 32 x 4096 fp32 summed by rows took
# 15.3 µs, 4096 x 768 6.8 µs) and microbench.py's `reductions` has nine shapes.
REDUCE_GRID_ROWS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)
REDUCE_GRID_COLS = (64, 256, 1024, 4096, 16384, 65536)
REDUCE_GRID_MAX_ELEMENTS = 1 << 27


def reduce_grid_shapes() -> list[tuple[int, int]]:
    """The (rows, cols) of the reduction grid: every pair of REDUCE_GRID_ROWS and REDUCE_GRID_COLS up to
    REDUCE_GRID_MAX_ELEMENTS elements."""
    return [(r, c) for r, c in itertools.product(REDUCE_GRID_ROWS, REDUCE_GRID_COLS)
            if r * c <= REDUCE_GRID_MAX_ELEMENTS]


def reductions_grid(results: list, quick: bool) -> None:
    rows_cols = reduce_grid_shapes()
    for (r, c), dtype in itertools.product(rows_cols[::3] if quick else rows_cols, (torch.bfloat16, torch.float32)):
        x = randn(r, c, dtype=dtype)
        base = {"rows": r, "cols": c, "dtype": str(dtype)[6:]}
        record(results, "sum_dim1", base, lambda: aten.sum.dim_IntList(x, [1], True))
        record(results, "sum_dim0", base, lambda: aten.sum.dim_IntList(x, [0], True))
        record(results, "sum_all", base, lambda: aten.sum.default(x))
    transposed_copies(results, quick)



# Reductions over inputs already in L2 against the same after the L2 flush (issue 30): a reduction reading the
# activation the op before it wrote (a loss's sum, a norm's statistics, a pooling's mean), or KernelBench's repeated
# call on one input. The sums over a middle dim of (16, 256, 256) fp32 ran 12.0 us after the flush on an H100
# (middle_reduce_grid) and 5.2 us on the H200 called again on one input (KernelBench level 1 #47); the L2 speed-up
# of the profile is measured on pointwise adds only. Sizes to 32 MiB (under a 50 MB L2), along the last dim, over
# a middle dim and to one value, and max with its index over the middle dim.
REDUCE_WARM_SHAPES = ((64, 1024), (1024, 1024), (4096, 2048), (16, 256, 256), (32, 512, 256), (8, 1024, 1024))
REDUCE_WARM_CASES = "reduce_l2_"  # case kinds: reduce_l2_{cold,warm}_{op}


def reduce_warm_grid(results: list, quick: bool) -> None:
    for shape, dtype in itertools.product(REDUCE_WARM_SHAPES[::2] if quick else REDUCE_WARM_SHAPES,
                                          (torch.bfloat16, torch.float32)):
        x = randn(*shape, dtype=dtype)
        base = {"shape": list(shape), "dtype": str(dtype)[6:]}
        calls = {"sum_last": lambda: aten.sum.dim_IntList(x, [-1]), "sum_all": lambda: aten.sum.default(x),
                 "mean_last": lambda: aten.mean.dim(x, [-1])}
        if len(shape) == 3:
            calls.update({"sum_middle": lambda: aten.sum.dim_IntList(x, [1]), "max_middle": lambda: aten.max.dim(x, 1)})
        else:
            calls["sum_first"] = lambda: aten.sum.dim_IntList(x, [0])
        for name, call in calls.items():
            record(results, f"{REDUCE_WARM_CASES}cold_{name}", base, call)
            record(results, f"{REDUCE_WARM_CASES}warm_{name}", base, call, flush=False)  # its input from L2
        del x


def value_index_grid(results: list, quick: bool) -> None:
    """Reductions that keep an index beside the value (max / min over a dim, argmax) over the reduction grid's
    shapes: their reduce kernel carries a (value, int64 index) pair per thread (ReduceOps: MaxOps, ArgMaxOps in
    aten/src/ATen/native/SharedReduceOps.h) and writes int64 indices, so it runs slower than a sum of the same
    shape. Beside each, the same shape's amax (a value-only max) for a like-for-like ratio."""
    rows_cols = reduce_grid_shapes()
    for (r, c), dtype in itertools.product(rows_cols[::3] if quick else rows_cols, (torch.bfloat16, torch.float32)):
        x = randn(r, c, dtype=dtype)
        base = {"rows": r, "cols": c, "dtype": str(dtype)[6:]}
        record(results, "max_dim1", base, lambda: aten.max.dim(x, 1, True))
        record(results, "max_dim0", base, lambda: aten.max.dim(x, 0, True))
        record(results, "argmax_dim1", base, lambda: aten.argmax.default(x, 1, True))
        record(results, "argmax_all", base, lambda: aten.argmax.default(x))
        record(results, "amax_dim1", base, lambda: aten.amax.default(x, [1], True))



# Reductions over a middle dim of (B, R, C), the kept inner dim C contiguous (torch.sum(x, dim=1), x.max(1)):
# TensorIterator keeps B x C outputs and reduces R rows strided by C. KernelBench level 1 #47 (a sum over dim 1 of
# 16 x 256 x 256 fp32) ran 5.3 us on the H200 where the column-sum curve, keyed by its 4096 outputs as a (256,
# 4096) column sum, priced 12.0 (scripts/device/kernelbench_kernels.py compare); the grid measures the kind.
MIDDLE_REDUCE_BATCHES = (1, 4, 16, 64, 256)
MIDDLE_REDUCE_ROWS = (16, 64, 256, 1024, 4096)
MIDDLE_REDUCE_COLS = (16, 64, 256, 1024, 4096)
MIDDLE_REDUCE_MAX_ELEMENTS = 1 << 26


def middle_reduce_grid(results: list, quick: bool) -> None:
    """sum, max over the dim and argmax over the middle dim of (B, R, C) tensors, bf16 and fp32."""
    shapes = [s for s in itertools.product(MIDDLE_REDUCE_BATCHES, MIDDLE_REDUCE_ROWS, MIDDLE_REDUCE_COLS)
              if math.prod(s) <= MIDDLE_REDUCE_MAX_ELEMENTS]
    for (b, r, c), dtype in itertools.product(shapes[::3] if quick else shapes, (torch.bfloat16, torch.float32)):
        x = randn(b, r, c, dtype=dtype)
        base = {"batch": b, "rows": r, "cols": c, "dtype": str(dtype)[6:]}
        record(results, "sum_middle", base, lambda: aten.sum.dim_IntList(x, [1]))
        record(results, "max_middle", base, lambda: aten.max.dim(x, 1))
        record(results, "argmax_middle", base, lambda: aten.argmax.default(x, 1))


# cuFFT transforms (issue 31: an FFT layer's GPU time -22% with no cuFFT time in the profile): torch.fft's real-
# to-complex, complex-to-real and complex-to-complex transforms over the last dim (1-D) and the last two (2-D),
# fp32, at transform sizes from a short window to a long signal (powers of two and a few with odd factors: cuFFT
# runs other kernels for them) and batch sizes spanning launch-bound to bandwidth-bound.
FFT_GRID_SIZES_1D = (64, 256, 400, 1000, 1024, 4096, 16384, 65536)
FFT_GRID_SIDES_2D = (32, 64, 100, 128, 256, 512)
FFT_GRID_ELEMENTS = (1 << 16, 1 << 20, 1 << 24)


def fft_grid(results: list, quick: bool) -> None:
    """rfft / irfft / fft over the last dim and rfft2 / irfft2 / fft2 over the last two, fp32."""
    sizes_1d, sides_2d = (FFT_GRID_SIZES_1D[::2], FFT_GRID_SIDES_2D[::2]) if quick else \
        (FFT_GRID_SIZES_1D, FFT_GRID_SIDES_2D)
    for n, total in itertools.product(sizes_1d, FFT_GRID_ELEMENTS):
        batch = max(1, total // n)
        x = randn(batch, n, dtype=torch.float32)
        spectrum = torch.fft.rfft(x)
        z = torch.complex(x, x)
        base = {"batch": batch, "n": n, "dims": 1, "dtype": "float32"}
        record(results, "fft_r2c", base, lambda: torch.fft.rfft(x))
        record(results, "fft_c2r", base, lambda: torch.fft.irfft(spectrum, n=n))
        record(results, "fft_c2c", base, lambda: torch.fft.fft(z))
    for side, total in itertools.product(sides_2d, FFT_GRID_ELEMENTS):
        batch = max(1, total // (side * side))
        x = randn(batch, side, side, dtype=torch.float32)
        spectrum = torch.fft.rfft2(x)
        z = torch.complex(x, x)
        base = {"batch": batch, "n": side, "dims": 2, "dtype": "float32"}
        record(results, "fft_r2c", base, lambda: torch.fft.rfft2(x))
        record(results, "fft_c2r", base, lambda: torch.fft.irfft2(spectrum, s=(side, side)))
        record(results, "fft_c2c", base, lambda: torch.fft.fft2(z))


# Attention's head transposes made contiguous ((B, S, H, D) <-> (B, H, S, D), `.transpose(1, 2).contiguous()`):
# copies whose reads or writes stride by the head dim. The earlier sections measured three such copies.
TRANSPOSE_GRID_BH = ((1, 8), (8, 12), (8, 32), (32, 16))
TRANSPOSE_GRID_SEQ = (1, 16, 128, 1024, 4096)
TRANSPOSE_GRID_HEAD_DIM = (64, 128)


def transposed_copies(results: list, quick: bool) -> None:
    grid = list(itertools.product(TRANSPOSE_GRID_BH, TRANSPOSE_GRID_SEQ, TRANSPOSE_GRID_HEAD_DIM))
    for ((b, h), s, d), dtype in itertools.product(grid[::3] if quick else grid, (torch.bfloat16, torch.float32)):
        x = randn(b, h, s, d, dtype=dtype)
        base = {"batch": b, "heads": h, "seq": s, "head_dim": d, "dtype": str(dtype)[6:]}
        record(results, "clone_transpose", base, lambda: aten.clone.default(x.transpose(1, 2),
                                                                            memory_format=torch.contiguous_format))


# Row-wise kernels (layer norm, softmax, forward and backward) and batch norm below the 1M elements the default
# sections start at: decode steps and small models run them on a few KB, where a kernel's fixed latency, not its
# bytes, sets the time (a GPT-2 decode step's 768-wide layer norms took 3.4 µs each; the curve from 4 MB down
# gave 0.8). And concatenations of two contiguous parts (measured, not used by the profile: calibrate/profile.py).
ROW_GRID_ELEMENTS = (1 << 10, 1 << 13, 1 << 16, 1 << 19)
ROW_GRID_WIDTHS = (64, 256, 768, 1024, 4096)
BN_GRID = [(n, c, hw) for n in (8, 32) for c in (32, 128, 512) for hw in (7, 14, 28)]
CAT_GRID = [(rows, width) for rows in (1, 16, 256, 4096) for width in (64, 768, 4096)]


def row_grid(results: list, quick: bool) -> None:
    for total, width, dtype in itertools.product(ROW_GRID_ELEMENTS, ROW_GRID_WIDTHS, (torch.bfloat16, torch.float32)):
        rows = max(total // width, 1)
        x, w, bsz = randn(rows, width, dtype=dtype), randn(width, dtype=dtype), randn(width, dtype=dtype)
        base = {"rows": rows, "width": width, "dtype": str(dtype)[6:]}
        record_row_kernels(results, base, x, w, bsz, torch.randn_like(x))
    for (n, c, hw), cl in itertools.product(BN_GRID[::3] if quick else BN_GRID, (True, False)):
        record_batch_norm(results, n, c, hw, cl, torch.float32, True)
    for (rows, width), dtype in itertools.product(CAT_GRID, (torch.bfloat16, torch.float32)):
        a, b = randn(rows, width, dtype=dtype), randn(rows, width, dtype=dtype)
        base = {"rows": rows, "width": width, "dtype": str(dtype)[6:]}
        record(results, "cat_dim0", base, lambda: aten.cat([a, b], 0))
        record(results, "cat_dim1", base, lambda: aten.cat([a, b], 1))


# Batch norm across channel counts and per-channel lengths: NCHW backward runs one thread block per channel
# (calibrate/norm_blocks.py), so its time follows C against the SMs and N x H x W, not the bytes; the default sections
# had few small-C cases (MobileNet's 16- and 24-channel layers at 112 x 112 were priced a third over).
BN_GRID_CHANNELS = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, 2048)
BN_GRID_SHAPES = ((8, 7), (8, 28), (8, 112), (32, 14), (32, 56), (32, 112), (128, 28))  # (N, H = W)
BN_GRID_MAX_ELEMENTS = 1 << 26


def bn_grid(results: list, quick: bool) -> None:
    for c, (n, hw), dtype, cl in itertools.product(BN_GRID_CHANNELS[::3] if quick else BN_GRID_CHANNELS,
                                                  BN_GRID_SHAPES, (torch.bfloat16, torch.float32), (False, True)):
        if n * c * hw * hw <= BN_GRID_MAX_ELEMENTS:
            record_batch_norm(results, n, c, hw, cl, dtype, True, warm=not cl)


# Weight normalization's fused CUDA kernels (aten/src/ATen/native/cuda/WeightNorm.cu), forward and backward: over
# the first dim a block of 256 threads per row; over the last dim blocks of 16 x 64 threads, one per 16 columns,
# each walking every row, so few columns leave most SMs idle (wav2vec2's positional conv, (768, 48, 128) fp32
# normed over dim 2: 79 us forward on the H200 in the zoo, 8 blocks for 4.7 M elements).
WEIGHT_NORM_FIRST = [(rows, row) for rows in (32, 256, 1024, 4096) for row in (64, 768, 4096, 49152)]
WEIGHT_NORM_LAST = [(slower, cols) for slower in (64, 1024, 36864, 262144) for cols in (16, 128, 1024, 8192)]
WEIGHT_NORM_MAX_ELEMENTS = 1 << 26


def weight_norm_grid(results: list, quick: bool) -> None:
    grid = [(0, shape) for shape in WEIGHT_NORM_FIRST] + [(1, shape) for shape in WEIGHT_NORM_LAST]
    for (dim, (outer, inner)), dtype in itertools.product(grid[::3] if quick else grid,
                                                          (torch.float32, torch.bfloat16, torch.float16)):
        if outer * inner > WEIGHT_NORM_MAX_ELEMENTS:
            continue
        v = randn(outer, inner, dtype=dtype)
        g = randn(outer, 1, dtype=dtype) if dim == 0 else randn(1, inner, dtype=dtype)
        w, norms = torch._weight_norm_interface(v, g, dim)
        grad = torch.randn_like(w)
        base = {"shape": [outer, inner], "dim": dim, "dtype": str(dtype)[6:]}
        record(results, "weight_norm", base, lambda: torch._weight_norm_interface(v, g, dim))
        record(results, "weight_norm_backward", base,
               lambda: aten._weight_norm_interface_backward(grad, v, g, norms, dim))


# torch.sort and torch.topk over slices of up to 4096 elements: one thread block per slice (the in-place sort,
# the single-block gatherTopK), so their time follows the slice and the slices in flight, not the bytes (zoo
# mixtral_forward: sorting 2048 int64 expert ids took 29 us, 33 KB; the large-sort curve gave ~5 us).
SORT_GRID_LENGTHS = (8, 64, 512, 2048, 4096)
SORT_GRID_SLICES = (1, 16, 256, 4096, 65536)
SORT_GRID_MAX_ELEMENTS = 1 << 24


def sort_grid(results: list, quick: bool) -> None:
    for n, slices, dtype in itertools.product(SORT_GRID_LENGTHS, SORT_GRID_SLICES[::2] if quick else SORT_GRID_SLICES,
                                              (torch.float32, torch.int64, torch.bfloat16)):
        if n * slices > SORT_GRID_MAX_ELEMENTS:
            continue
        x = (torch.randint(0, 1 << 30, (slices, n), device=DEV) if dtype == torch.int64
             else randn(slices, n, dtype=dtype))
        base = {"slices": slices, "length": n, "dtype": str(dtype)[6:]}
        record(results, "sort_slices", base, lambda: torch.sort(x, dim=-1))
        for k in (1, 2, 8):
            if k <= n:
                record(results, "topk_slices", {**base, "k": k}, lambda: torch.topk(x, k, dim=-1))


# torch._grouped_mm as MoE layers call it (transformers' grouped experts): tokens (T, K) grouped by offsets
# against per-expert weights (G, N, K) transposed, bf16 on the CUTLASS path (zoo mixtral_forward: 24-30 us per
# call where the GEMM roofline gave ~7); and the 2D x 2D weight gradient, each group summing over its tokens.
GROUPED_MM_GROUPS = (4, 8, 32, 128)
GROUPED_MM_TOKENS_PER_GROUP = (1, 16, 128, 1024)
GROUPED_MM_DIMS = ((256, 512), (1024, 2048), (4096, 1024), (4096, 14336))  # (K, N)
GROUPED_MM_MAX_FLOPS = 2e12


def grouped_mm_grid(results: list, quick: bool) -> None:
    for g, t, (k, n) in itertools.product(GROUPED_MM_GROUPS, GROUPED_MM_TOKENS_PER_GROUP,
                                          GROUPED_MM_DIMS[::2] if quick else GROUPED_MM_DIMS):
        tokens = g * t
        if 2.0 * tokens * k * n > GROUPED_MM_MAX_FLOPS or g * k * n * 2 > (4 << 30):
            continue
        x = randn(tokens, k)
        w = randn(g, n, k)
        offs = torch.arange(t, tokens + 1, t, device=DEV, dtype=torch.int32)
        base = {"groups": g, "tokens_per_group": t, "k": k, "n": n, "dtype": "bfloat16"}
        record(results, "grouped_mm", base, lambda: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs))
        grad = randn(tokens, n)
        record(results, "grouped_mm_weight_grad", base,
               lambda: torch._grouped_mm(grad.t(), x, offs=offs))


# torch.cat of inputs that are not contiguous, as rotary embeddings and KV caches make them (halves of a head
# dim, heads transposed): Cat.cu's batched kernel reads them element by element through their strides, slower
# than a copy (zoo gpt_neox_forward: 36 such cats, 374 us measured, 222 us at the copy curve's rate).
CAT_STRIDED_SHAPES = [(b, h, s, d) for b, h, s in ((1, 8, 128), (4, 16, 512), (8, 32, 1024), (16, 32, 2048))
                      for d in (64, 128)]


def cat_strided_grid(results: list, quick: bool) -> None:
    for (b, h, s, d), dtype in itertools.product(CAT_STRIDED_SHAPES[::2] if quick else CAT_STRIDED_SHAPES,
                                                 (torch.bfloat16, torch.float32)):
        x = randn(b, s, h, d, dtype=dtype).transpose(1, 2)  # (B, H, S, D) heads-transposed view
        half = d // 2
        base = {"shape": [b, h, s, d], "dtype": str(dtype)[6:]}
        # rotate_half: cat((-x2, x1)) of the two halves along the head dim
        record(results, "cat_strided", {**base, "pattern": "halves"},
               lambda: torch.cat((x[..., half:], x[..., :half]), dim=-1))
        # partial rotary: the rotated part (contiguous) with the untouched strided rest
        rot = randn(b, h, s, half, dtype=dtype)
        record(results, "cat_strided", {**base, "pattern": "rot_pass"},
               lambda: torch.cat((rot, x[..., half:]), dim=-1))
        # a KV cache grown along the sequence from a transposed new part
        record(results, "cat_strided", {**base, "pattern": "sequence"},
               lambda: torch.cat((x, x), dim=2))


# Sparse COO gradients and their optimizers (capture/sparse.py): coalesce (thrust's merge sort, unique_by_key, the
# summing kernel) over nnz and row widths, with few and many duplicate indices; and nn.EmbeddingBag's forward
# (one gather-and-reduce kernel) over indices, bag sizes, row widths and modes, into small and large tables.
SPARSE_GRID_NNZ = (2, 7, 48, 300, 1500, 6000, 24000, 96000, 384000, 1_500_000, 3_000_000)
SPARSE_GRID_DIMS = (1, 8, 32, 96, 256)
SPARSE_GRID_TABLE_ROWS = (5000, 2_000_000)
EMBEDDING_BAG_GRID_BAGS = ((64, 4), (512, 10), (2048, 30), (8192, 8), (16384, 50))  # (bags, indices per bag)
EMBEDDING_BAG_GRID_DIMS = (16, 64, 128, 384)
SPARSE_GRID_MAX_BYTES = 1 << 30


def sparse_grid(results: list, quick: bool) -> None:
    for nnz, dim, rows in itertools.product(SPARSE_GRID_NNZ[::2] if quick else SPARSE_GRID_NNZ, SPARSE_GRID_DIMS,
                                            SPARSE_GRID_TABLE_ROWS):
        for dtype in (torch.float32, torch.bfloat16) if dim == 96 else (torch.float32,):
            if nnz * dim * 4 > SPARSE_GRID_MAX_BYTES:
                continue
            s = torch.sparse_coo_tensor(torch.randint(0, rows, (1, nnz), device=DEV), randn(nnz, dim, dtype=dtype),
                                        (rows, dim))
            record(results, "coalesce", {"nnz": nnz, "dim": dim, "rows": rows, "dtype": str(dtype)[6:]},
                   lambda: s.coalesce())
    for (bags, per_bag), dim, mode, rows in itertools.product(EMBEDDING_BAG_GRID_BAGS, EMBEDDING_BAG_GRID_DIMS,
                                                              (0, 1, 2), SPARSE_GRID_TABLE_ROWS):
        if quick and dim not in (16, 128):
            continue
        weight = randn(rows, dim, dtype=torch.float32)
        idx = torch.randint(0, rows, (bags * per_bag,), device=DEV)
        offsets = torch.arange(0, bags * per_bag, per_bag, device=DEV)
        base = {"rows": rows, "dim": dim, "batch": bags, "bag": per_bag, "mode": ["sum", "mean", "max"][mode]}
        record(results, "embedding_bag_fwd", base, lambda: aten._embedding_bag(weight, idx, offsets, False, mode))


# Gathers of rows too narrow or ragged for the vectorized kernel (not a whole number of 16-byte vectors: a 1-D
# source, a relative-position table of 3-24 heads, EmbeddingBag's bag-size column), which TensorIterator's
# elementwise gather runs: from small (L1/L2-resident) and large tables, to 1k-2M indices.
GATHER_GRID_WIDTHS = ((0, torch.float32), (1, torch.float32), (2, torch.float32), (3, torch.float32),
                      (5, torch.float32), (6, torch.float32), (12, torch.float32), (24, torch.float32),
                      (33, torch.float32), (1, torch.bfloat16), (3, torch.bfloat16), (6, torch.bfloat16))
GATHER_GRID_TABLES = (169, 4096, 1_000_000)
GATHER_GRID_INDICES = (1024, 16384, 262144, 2_000_000)


def gather_grid(results: list, quick: bool) -> None:
    for (width, dtype), table, n in itertools.product(GATHER_GRID_WIDTHS, GATHER_GRID_TABLES,
                                                      GATHER_GRID_INDICES[::2] if quick else GATHER_GRID_INDICES):
        src = randn(table, dtype=dtype) if width == 0 else randn(table, width, dtype=dtype)
        idx = torch.randint(0, table, (n,), device=DEV)
        base = {"rows": table, "width": width, "indices": n, "dtype": str(dtype)[6:]}
        record(results, "gather_narrow_index_select", base, lambda: aten.index_select(src, 0, idx))
        record(results, "gather_narrow_index", base, lambda: src[idx])


# index_select of at most 16 indices (and embedding, which calls it): PyTorch's indexSelectSmallIndex kernel
# (aten/src/ATen/native/cuda/Indexing.cu, index_select_out_cuda_impl), whose threads each walk every index in turn
# over their part of the slice, so its time follows the indices x each thread's slice elements, not the bytes.
# Three layouts: the specialised kernel (source and output collapse to the same <= 3 dims, the index contiguous),
# the generic one by a non-contiguous index, and by a source that does not collapse (a KV cache's sliced view).
# Seen in the zoo on the H200 and an H100: beam search's cache reorders of 8 indices 7.3 µs each, the embeddings of
# 1-16 tokens 1.7-10.6 µs, where the gather's per-row line gave 2.9.
SMALL_INDEX_COUNTS = (1, 2, 4, 8, 12, 16)
SMALL_INDEX_SLICES = (64, 768, 4096, 24576, 131072, 524288, 2097152)
SMALL_INDEX_ROWS = 64
SMALL_INDEX_LAYOUTS = ("contiguous", "strided_index", "sliced_source")
SMALL_INDEX_WARM_BYTES = 16 << 20  # sources this small are timed again without the L2 flush (an H100 has 50 MB)


def _small_index_operands(layout: str, n: int, slice_elements: int, dtype):
    if layout == "sliced_source":  # (rows, 4, L, d) cut from a cache of 2L positions: three dims that do not merge
        d = 64 if slice_elements >= 256 else 8
        length = max(slice_elements // (4 * d), 1)
        src = randn(SMALL_INDEX_ROWS, 4, 2 * length, d, dtype=dtype)[:, :, :length]
    else:
        src = randn(SMALL_INDEX_ROWS, slice_elements, dtype=dtype)
    idx = torch.randint(0, SMALL_INDEX_ROWS, (2 * n if layout == "strided_index" else n,), device=DEV)
    return src, (idx[::2] if layout == "strided_index" else idx)


def small_index_grid(results: list, quick: bool) -> None:
    for layout, n, slice_elements, dtype in itertools.product(
            SMALL_INDEX_LAYOUTS, SMALL_INDEX_COUNTS[::2] if quick else SMALL_INDEX_COUNTS,
            SMALL_INDEX_SLICES[::2] if quick else SMALL_INDEX_SLICES, (torch.bfloat16, torch.float32)):
        src, idx = _small_index_operands(layout, n, slice_elements, dtype)
        base = {"layout": layout, "indices": n, "slice": slice_elements, "dtype": str(dtype)[6:]}
        record(results, "small_index_select", base, lambda: aten.index_select(src, 0, idx))
        if layout == "contiguous":
            record(results, "small_index_embedding", base, lambda: aten.embedding(src, idx))
        if src.untyped_storage().nbytes() <= SMALL_INDEX_WARM_BYTES:  # again from L2, as a cache just written is
            record(results, "small_index_select_warm", base, lambda: aten.index_select(src, 0, idx), flush=False)
        del src, idx


# index_add_ of at most 16 indices runs indexFuncSmallIndex (aten/src/ATen/native/cuda/Indexing.cu,
# index_add_cuda_impl): the grid and the walk of indexSelectSmallIndex, an atomic add per element where the select
# stores one. Seen in HF Mixtral's expert loop (`index_add_(0, top_x, ...)`: a decode step routes 1-2 tokens to an
# expert). Same counts, slices and layouts as small_index_grid, the destination's rows its source: the index
# strided, or the destination a cache's sliced view that does not collapse, run the generic kernel.
def small_index_add_grid(results: list, quick: bool) -> None:
    for layout, n, slice_elements, dtype in itertools.product(
            SMALL_INDEX_LAYOUTS, SMALL_INDEX_COUNTS[::2] if quick else SMALL_INDEX_COUNTS,
            SMALL_INDEX_SLICES[::2] if quick else SMALL_INDEX_SLICES, (torch.bfloat16, torch.float32)):
        dst, idx = _small_index_operands(layout, n, slice_elements, dtype)
        source = randn(n, *dst.shape[1:], dtype=dtype)
        base = {"layout": layout, "indices": n, "slice": slice_elements, "dtype": str(dtype)[6:]}
        record(results, "small_index_add", base, lambda: dst.index_add_(0, idx, source))
        del dst, idx, source
    # held out of the fit (its check, tests/costs): adds along the middle dim of a (8, 64, D) tensor, as a
    # per-head or per-position update is
    for n, width, dtype in itertools.product((2, 8, 16), (128, 4096), (torch.bfloat16, torch.float32)):
        dst = randn(8, SMALL_INDEX_ROWS, width, dtype=dtype)
        idx = torch.randint(0, SMALL_INDEX_ROWS, (n,), device=DEV)
        source = randn(8, n, width, dtype=dtype)
        base = {"layout": "middle_dim", "indices": n, "slice": 8 * width, "dtype": str(dtype)[6:]}
        record(results, "small_index_add_check", base, lambda: dst.index_add_(1, idx, source))
        del dst, idx, source


# nll_loss over (frames, classes) log-probabilities, the loss every classifier and language model ends with
# (cross_entropy = log_softmax + nll_loss). Its CUDA kernels with a reduction (aten/src/ATen/native/cuda/Loss.cu,
# nll_loss_forward_reduce_cuda_kernel_2d and the backward's nll_loss_backward_reduce_cuda_kernel_2d) run ONE thread
# block whose threads (nll_loss_threads: a power of two from the frames, 32-1024) walk the frames, each reading a
# target and the one log-probability it picks, so the time follows the frames per thread and the latency of those
# scattered reads, not the input's bytes: the zoo's LM heads ran 17-18 us forward and 9 us backward, an MLP's 10 and
# 5 (validation/zoo_measured.json.gz), where the bytes priced 0.8 us. Frames 8-131072, classes 10-128256 (inputs to
# 2 GiB), fp32 and bf16, mean and sum reductions, forward and backward (its zero fill of the gradient timed apart:
# per_item), after the L2 flush and, for inputs under 16 MiB, again from L2 (a log_softmax just wrote them).
NLL_FRAMES = (8, 32, 128, 512, 2048, 8192, 32768, 131072)
NLL_CLASSES = (10, 1000, 32768, 128256)
NLL_MAX_BYTES = 1 << 31
NLL_WARM_BYTES = 16 << 20


def nll_loss_grid(results: list, quick: bool) -> None:
    for frames, classes, dtype in itertools.product(NLL_FRAMES[::2] if quick else NLL_FRAMES, NLL_CLASSES,
                                                    (torch.bfloat16, torch.float32)):
        itemsize = torch.finfo(dtype).bits // 8
        if frames * classes * itemsize > NLL_MAX_BYTES:
            continue
        x = torch.log_softmax(randn(frames, classes, dtype=dtype), dim=1)
        target = torch.randint(0, classes, (frames,), device=DEV)
        for reduction, name in ((1, "mean"), (2, "sum")):
            base = {"frames": frames, "classes": classes, "dtype": str(dtype)[6:], "reduction": name}
            out, total_weight = aten.nll_loss_forward(x, target, None, reduction, -100)
            grad = torch.ones_like(out)
            forward = (lambda: aten.nll_loss_forward(x, target, None, reduction, -100))
            backward = (lambda: aten.nll_loss_backward(grad, x, target, None, reduction, -100, total_weight))
            record(results, "nll_loss_forward", base, forward, per_item=True)
            record(results, "nll_loss_backward", base, backward, per_item=True)
            if frames * classes * itemsize <= NLL_WARM_BYTES:
                record(results, "nll_loss_forward_warm", base, forward, flush=False, per_item=True)
                record(results, "nll_loss_backward_warm", base, backward, flush=False, per_item=True)
        del x, target


# Layer norm and RMS norm (forward, backward) across row widths, at four sizes each: their CUDA kernels run one
# block per row (layer_norm_kernel.cu), so a narrow row leaves a block little work and the rate falls with the
# width at a given size (ConvNeXt's 96-wide layer norm of (32, 56, 56, 96) bf16 ran 114 us, 340 GB/s, on the H200
# where a 768-wide one streams at 1.4 TB/s); RMS norm skips the mean and runs faster at narrow widths (its rows
# had shared the layer norm's curve). Widths not a multiple of 4 run the two unvectorized kernels.
NORM_WIDTHS = (32, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024, 1280, 1536, 2048, 2560, 3072,
               4096, 5120, 8192, 50, 100, 198, 390, 770, 1023, 1500, 2041, 4095)
NORM_GRID_BYTES = (1 << 18, 1 << 21, 1 << 24, 1 << 27)  # of the input


def norm_width_grid(results: list, quick: bool) -> None:
    for width, nbytes, dtype in itertools.product(NORM_WIDTHS[::4] if quick else NORM_WIDTHS, NORM_GRID_BYTES,
                                                  (torch.bfloat16, torch.float32)):
        rows = max(nbytes // (width * dtype.itemsize), 1)
        x, w, bsz = randn(rows, width, dtype=dtype), randn(width, dtype=dtype), randn(width, dtype=dtype)
        g = torch.randn_like(x)
        base = {"rows": rows, "width": width, "dtype": str(dtype)[6:]}
        record(results, "layer_norm_fwd", base, lambda: aten.native_layer_norm(x, [width], w, bsz, 1e-5))
        out, mean, rstd = aten.native_layer_norm(x, [width], w, bsz, 1e-5)
        record(results, "layer_norm_bwd", base, lambda: aten.native_layer_norm_backward(
            g, x, [width], mean, rstd, w, bsz, [True, True, True]))
        if hasattr(aten, "_fused_rms_norm"):
            record(results, "rms_norm_fwd", base, lambda: aten._fused_rms_norm(x, [width], w, 1e-5))
            _, rms_rstd = aten._fused_rms_norm(x, [width], w, 1e-5)
            if hasattr(aten, "_fused_rms_norm_backward"):
                record(results, "rms_norm_bwd", base, lambda: aten._fused_rms_norm_backward(
                    g, x, [width], rms_rstd, w, [True, True]))


# Copies that change which dim is innermost (a true transpose: the last two dims swapped, NCHW <-> NHWC), as
# .contiguous() of a permuted activation runs them: TensorIterator's non-vectorized copy, writes coalesced and
# reads strided (Whisper's (4, 1500, 384) bf16 conv output made contiguous: 16 us on the H200, 580 GB/s; the
# head transposes measured before keep the innermost dim and ran at 1.4 TB/s).
TRANSPOSE_GRID_MATRICES = ((1500, 384), (384, 1500), (3136, 96), (96, 3136), (784, 192), (196, 384), (49, 768),
                           (1024, 64), (64, 1024), (4096, 4096), (8192, 768), (768, 8192), (2048, 128),
                           (128, 2048), (400, 80), (80, 400))
TRANSPOSE_GRID_BYTES = (1 << 20, 1 << 23, 1 << 26, 1 << 28)
LAYOUT_GRID_CHANNELS = (3, 16, 64, 96, 192, 384, 768)
LAYOUT_GRID_SIZES = (7, 14, 28, 56, 112)
LAYOUT_GRID_BYTES = (1 << 22, 1 << 25, 1 << 27)


def layout_grid(results: list, quick: bool) -> None:
    for (m, n), nbytes, dtype in itertools.product(TRANSPOSE_GRID_MATRICES[::3] if quick else TRANSPOSE_GRID_MATRICES,
                                                   TRANSPOSE_GRID_BYTES, (torch.bfloat16, torch.float32)):
        batch = max(nbytes // (m * n * dtype.itemsize), 1)
        x = randn(batch, m, n, dtype=dtype)
        base = {"batch": batch, "m": m, "n": n, "dtype": str(dtype)[6:]}
        record(results, "transpose_last2", base, lambda: x.transpose(1, 2).contiguous())
    for c, hw, nbytes, dtype in itertools.product(LAYOUT_GRID_CHANNELS, LAYOUT_GRID_SIZES,
                                                  LAYOUT_GRID_BYTES[::2] if quick else LAYOUT_GRID_BYTES,
                                                  (torch.bfloat16, torch.float32)):
        batch = max(nbytes // (c * hw * hw * dtype.itemsize), 1)
        x = randn(batch, c, hw, hw, dtype=dtype)
        y = x.contiguous(memory_format=torch.channels_last)
        base = {"batch": batch, "c": c, "size": hw, "dtype": str(dtype)[6:]}
        record(results, "nchw_to_nhwc", base, lambda: x.permute(0, 2, 3, 1).contiguous())
        record(results, "nhwc_to_nchw", base, lambda: y.contiguous())


# Dense linear algebra (cuSOLVER / cuBLAS through torch.linalg) across matrix sizes and batches, fp32: small
# factorizations are latency-bound chains of panel kernels (a 30x30 LU's getrf_pivot kernel took 40 us on the H200,
# zoo linalg_solve), far from any roofline. The torch.linalg calls themselves, so each records the ops it runs.
LINALG_GRID_N = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
LINALG_GRID_BATCH = (1, 16, 256)
LINALG_GRID_MAX_ELEMENTS = 1 << 24


def linalg_grid(results: list, quick: bool) -> None:
    for n, batch in itertools.product(LINALG_GRID_N[::2] if quick else LINALG_GRID_N, LINALG_GRID_BATCH):
        if batch * n * n > LINALG_GRID_MAX_ELEMENTS:
            continue
        shape = (batch, n, n) if batch > 1 else (n, n)
        a = randn(*shape, dtype=torch.float32) + n * torch.eye(n, device=DEV)
        spd = a @ a.transpose(-2, -1)
        b = randn(*shape[:-1], 1, dtype=torch.float32)
        base = {"n": n, "batch": batch, "dtype": "float32"}
        record(results, "linalg_solve", base, lambda: torch.linalg.solve_ex(a, b))
        record(results, "linalg_lu_factor", base, lambda: torch.linalg.lu_factor_ex(a))
        record(results, "linalg_cholesky", base, lambda: torch.linalg.cholesky_ex(spd))
        record(results, "linalg_inv", base, lambda: torch.linalg.inv_ex(a))
        record(results, "linalg_solve_triangular", base,
               lambda: torch.linalg.solve_triangular(a, b, upper=False))
        if n <= 1024:
            record(results, "linalg_qr", base, lambda: torch.linalg.qr(a))
            record(results, "linalg_eigh", base, lambda: torch.linalg.eigh(spd))
            record(results, "linalg_svd", base, lambda: torch.linalg.svd(a, full_matrices=False))


# Kinds whose speed depends on the launch's geometry more than on bytes (issue 30): 3-D pooling (a window of
# up to 27 taps per output, or 8 at stride = kernel), 2-D average pooling with wide windows, layer norm over few
# rows of millions of elements (a block per row: 16 rows leave most SMs idle) and many short ones, group norm
# over few groups, and scans along either dim of (rows, cols) grids. Each a forward and, for pooling and norms,
# the backward, in fp32 and bf16.
POOL3D_SHAPES = ((2, 16, 16, 32, 32), (4, 32, 32, 64, 64), (16, 32, 64, 64, 64), (8, 64, 16, 56, 56),
                 (1, 3, 64, 128, 128))
POOL3D_WINDOWS = ((2, 2, 0, 1), (3, 2, 1, 1), (3, 1, 1, 1), (3, 2, 1, 3), (5, 3, 2, 1))  # kernel, stride, pad, dil
POOL2D_WINDOWS = ((3, 1, 1), (5, 5, 0), (11, 4, 0), (2, 2, 0), (7, 1, 3))
POOL2D_SHAPES = ((16, 64, 256, 256), (32, 128, 56, 56), (8, 3, 512, 512))
FEW_ROWS = (1, 2, 4, 16, 64, 256, 4096)
LONG_COLS = (1 << 16, 1 << 18, 1 << 20, 1 << 22)
GRID_MAX_ELEMENTS = 1 << 26
SCAN_ROWS = (1, 16, 128, 1024, 16384)
SCAN_COLS = (128, 1000, 4000, 32768, 1 << 20)


def shape_kinds_grid(results: list, quick: bool) -> None:
    for shape, (k, s, pad, dil), dtype in itertools.product(POOL3D_SHAPES[::2] if quick else POOL3D_SHAPES,
                                                            POOL3D_WINDOWS, (torch.float32, torch.bfloat16)):
        if math.prod(shape) * dtype.itemsize > 1 << 30 or pad > k // 2:
            continue
        x = randn(*shape, dtype=dtype)
        base = {"shape": list(shape), "kernel": k, "stride": s, "padding": pad, "dilation": dil,
                "dtype": str(dtype)[6:]}
        window = ([k] * 3, [s] * 3, [pad] * 3)
        record(results, "max_pool3d", base, lambda: aten.max_pool3d_with_indices(x, *window, [dil] * 3))
        out, idx = aten.max_pool3d_with_indices(x, *window, [dil] * 3)
        g = torch.randn_like(out)
        record(results, "max_pool3d_bwd", base, lambda: aten.max_pool3d_with_indices_backward(
            g, x, *window, [dil] * 3, False, idx))
        if dil == 1:
            record(results, "avg_pool3d", base, lambda: aten.avg_pool3d(x, *window))
            ga = torch.randn_like(aten.avg_pool3d(x, *window))
            record(results, "avg_pool3d_bwd", base, lambda: aten.avg_pool3d_backward(ga, x, *window, False, True,
                                                                                      None))
    for shape, (k, s, pad), dtype in itertools.product(POOL2D_SHAPES, POOL2D_WINDOWS, (torch.float32, torch.bfloat16)):
        x = randn(*shape, dtype=dtype)
        base = {"shape": list(shape), "kernel": k, "stride": s, "padding": pad, "dtype": str(dtype)[6:]}
        record(results, "avg_pool2d", base, lambda: aten.avg_pool2d(x, [k, k], [s, s], [pad, pad]))
        record(results, "max_pool2d", base, lambda: aten.max_pool2d_with_indices(x, [k, k], [s, s], [pad, pad]))
    for rows, cols, dtype in itertools.product(FEW_ROWS, LONG_COLS, (torch.float32, torch.bfloat16)):
        if rows * cols > GRID_MAX_ELEMENTS:
            continue
        x, w, b = randn(rows, cols, dtype=dtype), randn(cols, dtype=dtype), randn(cols, dtype=dtype)
        base = {"rows": rows, "width": cols, "dtype": str(dtype)[6:]}
        record(results, "layer_norm_fwd", base, lambda: aten.native_layer_norm(x, [cols], w, b, 1e-5))
        out, mean, rstd = aten.native_layer_norm(x, [cols], w, b, 1e-5)
        g = torch.randn_like(x)
        record(results, "layer_norm_bwd", base, lambda: aten.native_layer_norm_backward(
            g, x, [cols], mean, rstd, w, b, [True, True, True]))
    for (n, c, hw, groups), dtype in itertools.product(
            [(16, 64, 256, 8), (32, 256, 32, 32), (128, 512, 8, 8), (4, 32, 128, 1), (64, 128, 64, 4)],
            (torch.float32, torch.bfloat16)):
        x, w, b = randn(n, c, hw, hw, dtype=dtype), randn(c, dtype=dtype), randn(c, dtype=dtype)
        base = {"n": n, "c": c, "size": hw, "groups": groups, "dtype": str(dtype)[6:]}
        record(results, "group_norm_fwd", base, lambda: aten.native_group_norm(x, w, b, n, c, hw * hw, groups, 1e-5))
        out, mean, rstd = aten.native_group_norm(x, w, b, n, c, hw * hw, groups, 1e-5)
        g = torch.randn_like(x)
        record(results, "group_norm_bwd", base, lambda: aten.native_group_norm_backward(
            g, x, mean, rstd, w, n, c, hw * hw, groups, [True, True, True]))
    for rows, cols, dtype in itertools.product(SCAN_ROWS, SCAN_COLS, (torch.float32, torch.bfloat16)):
        if rows * cols > GRID_MAX_ELEMENTS:
            continue
        x = randn(rows, cols, dtype=dtype)
        base = {"rows": rows, "cols": cols, "dtype": str(dtype)[6:]}
        record(results, "cumsum_last", base, lambda: aten.cumsum(x, -1))
        record(results, "cumsum_first", base, lambda: aten.cumsum(x, 0))
        record(results, "cumprod_last", base, lambda: aten.cumprod(x, -1))


# Ops over the channel dim of NC(D)HW activations, as KernelBench's chains run them (issue 30; its H200 kernels,
# validation/kernelbench/h200_kernels.json.gz, had cuDNN's training batch norm at 17% of the measured time over
# 5 programs and softmax over dim 1 at 31% over 7):
# - cuDNN's batch norm in training (F.batch_norm's path for fp32 and fp16 inputs with fp32 weights): a block
#   per channel reduces its N x spatial values, so 16 channels of 33 M values each run on 16 SMs;
# - softmax over a dim that is not the last (SoftMax.cu's spatial kernels: a thread per inner position walks
#   the dim three times);
# - group norm at few groups over long 3-D maps.
CHANNEL_BN_CHANNELS = (3, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
CHANNEL_BN_PER_CHANNEL = tuple(1 << e for e in range(10, 26, 3))  # N x spatial values per channel: 1 K .. 32 M
CHANNEL_MAX_ELEMENTS = 1 << 29  # 2 GiB of fp32 per tensor: KernelBench level 2 #72 is 16 x 33.5 M
SPATIAL_SOFTMAX_DIMS = (3, 8, 16, 64, 256, 1024)
SPATIAL_SOFTMAX_INNER = (16, 256, 4096, 65536)
SPATIAL_SOFTMAX_ELEMENTS = (1 << 20, 1 << 24, 1 << 27)
GROUP_NORM_SHAPES = [(n, c, spatial, g) for c in (16, 64, 256) for g in (1, 4, 8, 32) if g <= c
                     for spatial, n in ((1024, 64), (32768, 16), (262144, 8))]


def _channel_shape(n_values: int, c: int, five_d: bool) -> tuple[int, ...]:
    """An NCHW or NCDHW shape with n_values = N x spatial per channel: N = 16 where it fits, the rest spatial."""
    n = min(16, n_values)
    spatial = n_values // n
    if five_d:
        d = max(1, round(spatial ** (1 / 3)))
        return (n, c, d, max(1, spatial // (d * d)), d)
    h = max(1, round(spatial ** 0.5))
    return (n, c, h, spatial // h)


def channel_grid(results: list, quick: bool) -> None:
    for c, per_channel, five_d, dtype in itertools.product(
            CHANNEL_BN_CHANNELS[::3] if quick else CHANNEL_BN_CHANNELS, CHANNEL_BN_PER_CHANNEL, (False, True),
            (torch.float32, torch.float16)):
        if c * per_channel > CHANNEL_MAX_ELEMENTS or (five_d and per_channel < 1 << 13):
            continue
        shape = _channel_shape(per_channel, c, five_d)
        x = randn(*shape, dtype=dtype)
        w, b = randn(c, dtype=torch.float32), randn(c, dtype=torch.float32)
        rm, rv = torch.zeros(c, device=DEV), torch.ones(c, device=DEV)
        base = {"shape": list(shape), "dtype": str(dtype)[6:]}
        record(results, "cudnn_batch_norm_train", base, lambda: aten.cudnn_batch_norm(x, w, b, rm, rv, True, 0.1,
                                                                                        1e-5))
        out, mean, invstd, reserve = aten.cudnn_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
        g = torch.randn_like(out)
        record(results, "cudnn_batch_norm_train_bwd", base, lambda: aten.cudnn_batch_norm_backward(
            x, g, w, rm, rv, mean, invstd, 1e-5, reserve))
        del x, out, g
    for dim, inner, total, dtype in itertools.product(SPATIAL_SOFTMAX_DIMS, SPATIAL_SOFTMAX_INNER,
                                                      SPATIAL_SOFTMAX_ELEMENTS, (torch.float32, torch.bfloat16)):
        outer = total // (dim * inner)
        if outer < 1 or (quick and total > 1 << 24):
            continue
        x = randn(outer, dim, inner, dtype=dtype)
        base = {"outer": outer, "dim": dim, "inner": inner, "dtype": str(dtype)[6:]}
        record(results, "softmax_spatial_fwd", base, lambda: aten._softmax(x, 1, False))
        y = aten._softmax(x, 1, False)
        g = torch.randn_like(y)
        record(results, "softmax_spatial_bwd", base, lambda: aten._softmax_backward_data(g, y, 1, x.dtype))
        del x, y, g
    for (n, c, spatial, groups), dtype in itertools.product(GROUP_NORM_SHAPES, (torch.float32, torch.bfloat16)):
        if quick and spatial > 32768:
            continue
        x, w, b = randn(n, c, spatial, dtype=dtype), randn(c, dtype=dtype), randn(c, dtype=dtype)
        base = {"n": n, "c": c, "spatial": spatial, "groups": groups, "dtype": str(dtype)[6:]}
        record(results, "group_norm_fwd", base, lambda: aten.native_group_norm(x, w, b, n, c, spatial, groups, 1e-5))
        out, mean, rstd = aten.native_group_norm(x, w, b, n, c, spatial, groups, 1e-5)
        g = torch.randn_like(x)
        record(results, "group_norm_bwd", base, lambda: aten.native_group_norm_backward(
            g, x, mean, rstd, w, n, c, spatial, groups, [True, True, True]))
        del x, out, g


# Grids the default run takes too (a few seconds each), beside microbench.py's SECTIONS.
DEFAULT_GRIDS = ("small_index_grid", "small_index_add_grid")
# The others are not in the default run: by name (`kernelcast calibrate --sections reduce_grid`).
EXTRA_SECTIONS = {"reduce_grid": reductions_grid, "row_grid": row_grid, "bn_grid": bn_grid,
                  "weight_norm_grid": weight_norm_grid, "sort_grid": sort_grid,
                  "grouped_mm_grid": grouped_mm_grid, "cat_strided_grid": cat_strided_grid,
                  "sparse_grid": sparse_grid, "gather_grid": gather_grid, "small_index_grid": small_index_grid,
                  "small_index_add_grid": small_index_add_grid, "nll_loss_grid": nll_loss_grid,
                  "reduce_warm_grid": reduce_warm_grid,
                  "norm_width_grid": norm_width_grid, "shape_kinds_grid": shape_kinds_grid,
                  "layout_grid": layout_grid, "linalg_grid": linalg_grid, "channel_grid": channel_grid,
                  "value_index_grid": value_index_grid, "middle_reduce_grid": middle_reduce_grid, "fft_grid": fft_grid,
                  "triton_grid": lambda results, quick: triton_grid(results, quick, flush_l2)}
