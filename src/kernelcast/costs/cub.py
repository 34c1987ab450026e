"""GPU work items of the CUB device-wide primitives ATen calls (aten/src/ATen/cuda/cub.cuh, cub.h).

Pure functions of sizes, restating CUB's dispatch (cub/device/dispatch/dispatch_radix_sort.cuh,
dispatch_scan.cuh, dispatch_unique_by_key.cuh) and its sm_80+ tuning (tuning_radix_sort.cuh, Policy800), the
policy an sm_90 GPU runs. Checked on the H200 (torch 2.11, CUDA 13): embedding backward's 64-bit sort of
40960 keys ran 2 + 8 memsets, a histogram, an exclusive sum and 8 onesweep passes (zoo dlrm_train_adagrad);
index_put's 16-bit sort of 500000 keys 4 memsets and 2 passes (zoo gcn_train); 4096 keys one single-tile kernel.
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


def radix_sort_pairs_kernels(num_keys: int, key_bits: int, dominant_bytes: int = 8) -> int:
    """Work items of cub::DeviceRadixSort::SortPairs over `key_bits` bits (DispatchRadixSort::Invoke): one
    single-tile kernel for small inputs, else onesweep."""
    if num_keys <= 0:
        return 0
    if num_keys <= single_tile_keys(dominant_bytes):
        return 1
    passes = math.ceil(key_bits / ONESWEEP_RADIX_BITS)
    portions = math.ceil(num_keys / ONESWEEP_PORTION_KEYS)
    return ONESWEEP_SETUP_ITEMS + ONESWEEP_ITEMS_PER_PASS * passes * portions


def num_bits(max_key: int) -> int:
    """at::cuda::cub::get_num_bits: bits a radix sort needs for keys in [0, max_key] (at least 1)."""
    bits = 1
    while max_key > 1:
        max_key >>= 1
        bits += 1
    return bits
