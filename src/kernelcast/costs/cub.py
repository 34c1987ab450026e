"""GPU work items of the CUB device-wide primitives ATen calls (aten/src/ATen/cuda/cub.cuh, cub.h).

Pure functions of sizes, restating CUB's dispatch (cub/device/dispatch/dispatch_radix_sort.cuh,
dispatch_scan.cuh, dispatch_unique_by_key.cuh) and its sm_80+ tuning (tuning_radix_sort.cuh, Policy800), the
policy an sm_90 GPU runs. Checked on the H200 (torch 2.11, CUDA 13): embedding backward's 64-bit sort of
40960 keys ran 2 + 8 memsets, a histogram, an exclusive sum and 8 onesweep passes (zoo dlrm_train_adagrad);
index_put's 16-bit sort of 500000 keys 4 memsets and 2 passes (zoo gcn_train); 4096 keys one single-tile kernel;
torch.sort of 4097 to 2**20 float32 keys (with int64 values) 12 items, of int64 keys 20
(validation/probes/cuda_path_probe.json: 14 and 22 with sort's own copy and index fill); topk's segmented sort of
4 x 5000 float32 keys (int2 values) 12, then of their 2-bit segment ids as int64 keys 6
(validation/probes/launch_rules.json, topk_large_k). Keys of 1 or 2 bytes (no onesweep) and the segmented radix
sort are read off CUB's source and not measured.
"""

from __future__ import annotations

import math

# Single-tile radix sort: AgentRadixSortDownsweepPolicy<256, 19, DominantT> scaled by RegBoundScaling (items per
# thread = 19 * 4 / max(4, sizeof(DominantT)), threads capped by 48 KB of registers); one kernel sorts up to
# threads * items keys.
SINGLE_TILE_NOMINAL_THREADS = 256
SINGLE_TILE_NOMINAL_ITEMS_4B = 19
REG_BOUND_BYTES = 1024 * 48
WARP = 32
# Onesweep (InvokeOnesweep): memset of the pass counters, memset of the histograms, the histogram kernel and the
# exclusive-sum kernel once; then per pass of 8 bits and per portion of < 2^28 keys a lookback memset and a
# onesweep kernel.
ONESWEEP_RADIX_BITS = 8
ONESWEEP_SETUP_ITEMS = 4
ONESWEEP_ITEMS_PER_PASS = 2
ONESWEEP_PORTION_KEYS = (1 << 28) - 1
# Policy800: ONESWEEP = sizeof(KeyT) >= sizeof(uint32_t). Smaller keys take the classic passes of
# PRIMARY_RADIX_BITS (7, or 5 for 1-byte keys): per pass an upsweep, the spine scan and a downsweep
# (DispatchRadixSort::InvokePasses); no memsets.
ONESWEEP_MIN_KEY_BYTES = 4
PRIMARY_RADIX_BITS, PRIMARY_RADIX_BITS_1B = 7, 5
KERNELS_PER_CLASSIC_PASS = 3
# DeviceSegmentedRadixSort: one kernel per pass of SEGMENTED_RADIX_BITS (6, or 5 for 1-byte keys), every segment
# in the same launch (DispatchSegmentedRadixSort::InvokePasses).
SEGMENTED_RADIX_BITS, SEGMENTED_RADIX_BITS_1B = 6, 5
# DeviceScan (inclusive/exclusive scans, scans by key) and DeviceSelect::UniqueByKey: an init kernel that
# clears the tile states, then the single-pass scan/compaction kernel.
SCAN_KERNELS = 2
UNIQUE_BY_KEY_KERNELS = 2


def single_tile_keys(dominant_bytes: int) -> int:
    """Most keys the single-tile radix sort kernel handles (DominantT: the larger of key and value types)."""
    size = max(4, dominant_bytes)
    items = max(1, SINGLE_TILE_NOMINAL_ITEMS_4B * 4 // size)
    threads = min(SINGLE_TILE_NOMINAL_THREADS, (REG_BOUND_BYTES // (size * items) + WARP - 1) // WARP * WARP)
    return threads * items


def radix_sort_kernels(num_keys: int, key_bits: int, key_bytes: int, dominant_bytes: int) -> int:
    """Work items of cub::DeviceRadixSort (DispatchRadixSort::Invoke) over `key_bits` bits of keys of
    `key_bytes` bytes (dominant_bytes: the larger of key and value): one single-tile kernel up to a tile; else
    onesweep for keys of 4 bytes and more (its setup, then per 8-bit pass and portion a memset and a kernel),
    the classic three kernels per 7-bit pass for smaller keys."""
    if num_keys <= 0:
        return 0
    if num_keys <= single_tile_keys(dominant_bytes):
        return 1
    if key_bytes < ONESWEEP_MIN_KEY_BYTES:
        bits = PRIMARY_RADIX_BITS if key_bytes > 1 else PRIMARY_RADIX_BITS_1B
        return KERNELS_PER_CLASSIC_PASS * max(1, math.ceil(key_bits / bits))
    passes = max(1, math.ceil(key_bits / ONESWEEP_RADIX_BITS))
    portions = math.ceil(num_keys / ONESWEEP_PORTION_KEYS)
    return ONESWEEP_SETUP_ITEMS + ONESWEEP_ITEMS_PER_PASS * passes * portions


def radix_sort_pairs_kernels(num_keys: int, key_bits: int, dominant_bytes: int = 8, key_bytes: int = 8) -> int:
    """cub::DeviceRadixSort::SortPairs (ATen's at::cuda::cub::radix_sort_pairs); int64 keys and values unless
    told."""
    return radix_sort_kernels(num_keys, key_bits, key_bytes, max(key_bytes, dominant_bytes))


def radix_sort_keys_kernels(num_keys: int, key_bits: int, key_bytes: int) -> int:
    """cub::DeviceRadixSort::SortKeys (at::cuda::cub::radix_sort_keys): the keys alone set the tile."""
    return radix_sort_kernels(num_keys, key_bits, key_bytes, key_bytes)


def segmented_radix_sort_kernels(key_bits: int, key_bytes: int) -> int:
    """cub::DeviceSegmentedRadixSort::SortPairs (at::cuda::cub::segmented_sort_pairs): a kernel per pass."""
    bits = SEGMENTED_RADIX_BITS if key_bytes > 1 else SEGMENTED_RADIX_BITS_1B
    return max(1, math.ceil(key_bits / bits))


def num_bits(max_key: int) -> int:
    """at::cuda::cub::get_num_bits: bits a radix sort needs for keys in [0, max_key] (at least 1)."""
    bits = 1
    while max_key > 1:
        max_key >>= 1
        bits += 1
    return bits
