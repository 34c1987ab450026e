"""A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator).

What it reproduces, function by function of the C++:
- round_size: every request rounded up to a multiple of kMinBlockSize (512 bytes); requests under 512 bytes
  take 512 (roundup_power2_divisions is off by default);
- get_pool: requests of at most kSmallSize (1 MiB) come from the small pool, the rest from the large pool;
  each pool keeps its free blocks per stream (BlockComparatorSize orders them by stream, size, address);
- get_allocation_size: a new segment (cudaMalloc) for a small request is kSmallBuffer (2 MiB); for a large
  request under kMinLargeAlloc (10 MiB), kLargeBuffer (20 MiB); else the request rounded up to kRoundLarge
  (2 MiB);
- get_free_block: best fit: the smallest cached free block of the same stream at least as large (lowest
  address among equals); with the default max_split_size (unlimited) no oversize rule applies;
- should_split / alloc_found_block: a found block is split when the rest is at least kMinBlockSize (small pool)
  or more than kSmallSize (large pool); otherwise the whole block is handed out and counted as allocated
  (memory_allocated() counts block sizes, not requests);
- free_block / try_merge_blocks: a freed block merges with free neighbours of its segment; segments stay
  reserved (cached) until empty_cache or an out-of-memory retry;
- malloc's retry on cudaMalloc failure: release_cached_blocks frees every cached segment with no block in use,
  then the cudaMalloc is tried again; if it still fails, CUDA out of memory.
- expandable_segments:True (Note [Expandable Segments]): one segment per stream and pool that grows by pages
  (2 MiB for the small pool, 20 MiB for the large one: ExpandableSegment's segment_size); blocks in it split
  when the rest is at least 512 bytes (should_split), and freed pages stay mapped until a retry unmaps them.

What it does not model: CUDA graph private pools, record_stream's deferred frees (a block used on a second
stream is reused only after that stream's work; here it is reusable at once), garbage_collection_threshold,
max_split_size_mb.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

K_MIN_BLOCK_SIZE = 512  # kMinBlockSize
K_SMALL_SIZE = 1 << 20  # kSmallSize: the largest "small" request, 1 MiB
K_SMALL_BUFFER = 2 << 20  # kSmallBuffer: small requests are packed in 2 MiB segments
K_MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc: requests under 10 MiB share 20 MiB segments
K_LARGE_BUFFER = 20 << 20  # kLargeBuffer
K_ROUND_LARGE = 2 << 20  # kRoundLarge: larger segments are the request rounded up to 2 MiB
# ExpandableSegment's page ("segment_size"): 2 MiB pages for the small pool, 20 MiB for the large pool.
EXPANDABLE_PAGE = {True: K_SMALL_BUFFER, False: K_LARGE_BUFFER}


def round_size(nbytes: int) -> int:
    """The block size a request of `nbytes` takes (round_size)."""
    if nbytes < K_MIN_BLOCK_SIZE:
        return K_MIN_BLOCK_SIZE
    return K_MIN_BLOCK_SIZE * ((nbytes + K_MIN_BLOCK_SIZE - 1) // K_MIN_BLOCK_SIZE)


def is_small(size: int) -> bool:
    """get_pool: the small pool serves rounded sizes up to 1 MiB."""
    return size <= K_SMALL_SIZE


def allocation_size(size: int) -> int:
    """The segment cudaMalloc'd when no cached block fits a rounded request (get_allocation_size)."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return K_ROUND_LARGE * ((size + K_ROUND_LARGE - 1) // K_ROUND_LARGE)


def should_split(block_size: int, size: int, small: bool, expandable: bool = False) -> bool:
    """Whether a free block of block_size handing out `size` keeps the rest as a free block (should_split)."""
    remaining = block_size - size
    if small or expandable:
        return remaining >= K_MIN_BLOCK_SIZE
    return remaining > K_SMALL_SIZE


class OutOfMemory(Exception):
    """cudaMalloc failed even after the cached segments were released (the allocator's OOM error)."""

    def __init__(self, requested: int, segment: int, allocated: int, reserved: int) -> None:
        super().__init__(f"CUDA out of memory: tried to allocate {segment} bytes")
        self.requested, self.segment, self.allocated, self.reserved = requested, segment, allocated, reserved


@dataclass
class _Block:
    segment: int
    offset: int
    size: int
    stream: int
    small: bool
    allocated: bool = False
    prev: "_Block | None" = None
    next: "_Block | None" = None

    def key(self) -> tuple:
        return (self.stream, self.size, self.segment, self.offset)


@dataclass
class _Segment:
    size: int
    stream: int
    small: bool
    head: _Block | None = None
    expandable: bool = False


@dataclass
class CachingAllocator:
    """The allocator's state: segments, the free blocks of each pool, and the stats torch.cuda reports.
    capacity_bytes: what cudaMalloc may reserve in all (None: unlimited)."""

    capacity_bytes: int | None = None
    expandable_segments: bool = False
    allocated: int = 0  # memory_allocated()
    reserved: int = 0  # memory_reserved()
    peak_allocated: int = 0  # max_memory_allocated() since reset_peak
    peak_reserved: int = 0
    failed: OutOfMemory | None = None  # the request that ran out of memory, once one has
    _free: dict[bool, list] = field(default_factory=lambda: {True: [], False: []})  # small? -> sorted keys
    _free_blocks: dict[tuple, _Block] = field(default_factory=dict)
    _segments: dict[int, _Segment] = field(default_factory=dict)
    _growing: dict[tuple[int, bool], int] = field(default_factory=dict)  # (stream, small) -> expandable segment
    _next_segment: int = 0

    # -- public --------------------------------------------------------------------------------------------
    def malloc(self, nbytes: int, stream: int = 0) -> _Block:
        size = round_size(nbytes)
        small = is_small(size)
        block = self._find_free(size, stream, small)
        if block is None:
            block = self._new_block(size, stream, small)
        block = self._take(block, size)
        self.allocated += block.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return block

    def free(self, block: _Block) -> None:
        block.allocated = False
        self.allocated -= block.size
        for neighbour in (block.prev, block.next):
            if neighbour is not None and not neighbour.allocated:
                self._unlist(neighbour)
                self._merge(block, neighbour)
        self._list(block)

    def reset_peak(self) -> None:
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved

    def release_cached(self) -> None:
        """empty_cache / release_cached_blocks: free every segment with no block in use (expandable segments:
        unmap their free pages at the end)."""
        for seg_id, seg in list(self._segments.items()):
            head = seg.head
            if seg.expandable:
                self._unmap_tail(seg_id, seg)
            elif head is not None and head.next is None and not head.allocated:
                self._unlist(head)
                self.reserved -= seg.size
                del self._segments[seg_id]

    # -- blocks --------------------------------------------------------------------------------------------
    def _list(self, block: _Block) -> None:
        key = block.key()
        bisect.insort(self._free[block.small], key)
        self._free_blocks[key] = block

    def _unlist(self, block: _Block) -> None:
        key = block.key()
        keys = self._free[block.small]
        i = bisect.bisect_left(keys, key)
        del keys[i]
        del self._free_blocks[key]

    def _find_free(self, size: int, stream: int, small: bool) -> _Block | None:
        keys = self._free[small]
        i = bisect.bisect_left(keys, (stream, size, -1, -1))
        if i == len(keys) or keys[i][0] != stream:
            return None
        block = self._free_blocks[keys[i]]
        self._unlist(block)
        return block

    def _take(self, block: _Block, size: int) -> _Block:
        """alloc_found_block: split off the rest when should_split says so."""
        if should_split(block.size, size, block.small, self.expandable_segments):
            rest = _Block(block.segment, block.offset + size, block.size - size, block.stream, block.small,
                          prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next, block.size = rest, size
            self._list(rest)
        block.allocated = True
        return block

    def _merge(self, block: _Block, other: _Block) -> None:
        if other is block.prev:
            block.offset, block.prev = other.offset, other.prev
            if other.prev is not None:
                other.prev.next = block
            else:
                self._segments[block.segment].head = block
        else:
            block.next = other.next
            if other.next is not None:
                other.next.prev = block
        block.size += other.size

    # -- segments ------------------------------------------------------------------------------------------
    def _reserve(self, nbytes: int, requested: int) -> None:
        """cudaMalloc of nbytes; on failure release the cached segments and try once more (malloc's retry)."""
        if self.capacity_bytes is not None and self.reserved + nbytes > self.capacity_bytes:
            self.release_cached()
            if self.reserved + nbytes > self.capacity_bytes:
                self.failed = OutOfMemory(requested, nbytes, self.allocated, self.reserved)
                raise self.failed
        self.reserved += nbytes
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def _new_block(self, size: int, stream: int, small: bool) -> _Block:
        if self.expandable_segments:
            return self._grow(size, stream, small)
        nbytes = allocation_size(size)
        self._reserve(nbytes, size)
        seg_id = self._next_segment
        self._next_segment += 1
        block = _Block(seg_id, 0, nbytes, stream, small)
        self._segments[seg_id] = _Segment(nbytes, stream, small, head=block)
        return block

    def _grow(self, size: int, stream: int, small: bool) -> _Block:
        """Map pages at the end of the stream's expandable segment (try_allocate_expandable_block): the free
        block at its end, if any, grows; else a new block starts there."""
        page = EXPANDABLE_PAGE[small]
        seg_id = self._growing.get((stream, small))
        if seg_id is None:
            seg_id = self._next_segment
            self._next_segment += 1
            self._growing[(stream, small)] = seg_id
            self._segments[seg_id] = _Segment(0, stream, small, expandable=True)
        seg = self._segments[seg_id]
        tail = seg.head
        while tail is not None and tail.next is not None:
            tail = tail.next
        have = tail.size if tail is not None and not tail.allocated else 0
        extra = -(-(size - have) // page) * page
        self._reserve(extra, size)
        seg.size += extra
        if have:
            self._unlist(tail)
            tail.size += extra
            return tail
        block = _Block(seg_id, seg.size - extra, extra, stream, small, prev=tail)
        if tail is None:
            seg.head = block
        else:
            tail.next = block
        return block

    def _unmap_tail(self, seg_id: int, seg: _Segment) -> None:
        """Unmap the whole free pages at the end of an expandable segment."""
        tail = seg.head
        while tail is not None and tail.next is not None:
            tail = tail.next
        if tail is None or tail.allocated:
            return
        page = EXPANDABLE_PAGE[seg.small]
        start = -(-tail.offset // page) * page
        release = seg.size - start
        if release <= 0:
            return
        self._unlist(tail)
        tail.size -= release
        seg.size -= release
        self.reserved -= release
        if tail.size > 0:
            self._list(tail)
        elif tail.prev is not None:
            tail.prev.next = None
        else:
            seg.head = None
