"""How fast this CPU runs Python: one fixed workload, timed, so host times can move between machines.

Model code between aten ops (module calls, hooks, mask building) is plain Python. Its time on the capture
machine, scaled by the ratio of this benchmark's time on the target host to its time here, estimates it on
the target host. The workload mixes what such code does: attribute lookups, calls, small dicts and lists.
"""

from __future__ import annotations

import functools
import time

BENCH_ROUNDS = 2000
BENCH_REPEATS = 5


class _Layer:
    def __init__(self, width: int) -> None:
        self.width = width
        self.config = {"heads": 12, "dropout": 0.1, "causal": True}
        self.children = [width, width * 2, width * 4]

    def forward(self, x: int) -> int:
        if self.config["causal"] and x >= 0:
            x = x + self.width
        return sum(c for c in self.children if c > x % 7) + len(self.config)


def _workload(rounds: int) -> int:
    layers = [_Layer(w) for w in range(8)]
    total = 0
    for i in range(rounds):
        for layer in layers:
            total = (total + layer.forward(i)) % 1_000_003
        kwargs = {"output_attentions": False, "use_cache": i % 2 == 0}
        total += len([k for k, v in kwargs.items() if v])
    return total


def python_bench_us(repeats: int = BENCH_REPEATS) -> float:
    """Fastest µs of the fixed workload over `repeats` runs (about 8 ms on a current server core). The
    fastest, not the median: on shared machines the same run swings by half between calls, and only the
    fastest reads the core's speed rather than its neighbours' load."""
    _workload(BENCH_ROUNDS // 10)  # warm up
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        _workload(BENCH_ROUNDS)
        runs.append((time.perf_counter() - t0) * 1e6)
    return min(runs)


@functools.lru_cache(maxsize=1)
def this_machine_bench_us() -> float:
    return python_bench_us()
