"""How fast this CPU runs a step's host side: three CPU-bound microbenchmarks, so host times can move between
machines, and the CPU's name, so a prediction can say which CPUs it carried them between.

A step's host time has three kinds of CPU work: plain Python (the model's own code, transformers' logic),
torch's dispatch of an op (binding, dispatcher, allocation), and nn.Module's call machinery. One benchmark per
kind; the ratios of the three between two machines should agree when the machines differ by raw speed, and how
far they disagree is how uncertain the carried host time is (predict/host.py gives it as a range):
- python: a fixed workload mixing what model code does: attribute lookups, calls, small dicts and lists;
- dispatch: 2000 `torch.add` on 4-element CPU tensors (no GPU needed, and the same on every machine);
- module: 5000 calls of an `nn.Identity` module (hooks machinery, no tensor work).
scripts/device/zoo_measure.py records the same three on the device host, with the same names.

Each is timed in CPU time of the calling thread (time.thread_time_ns), not wall time: time the thread waits
for a core while other processes run is not in it, so a loaded machine reads its own speed. The fastest of
BENCH_REPEATS runs is kept: what noise remains (interrupts, caches other processes evicted) only adds time.
"""

from __future__ import annotations

import functools
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

BENCH_ROUNDS = 2000
BENCH_REPEATS = 5
DISPATCH_CALLS = 2000
MODULE_CALLS = 5000
# The clock every host figure of the capture is read with (host_clock.py uses it too): CPU time of this thread.
thread_cpu_ns = time.thread_time_ns


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


def fastest_us(fn: Callable[[], object], repeats: int = BENCH_REPEATS) -> float:
    """Fastest µs of CPU time of fn() over `repeats` runs, after one warm-up run."""
    fn()
    runs = []
    for _ in range(repeats):
        t0 = thread_cpu_ns()
        fn()
        runs.append((thread_cpu_ns() - t0) / 1e3)
    return min(runs)


def python_bench_us(repeats: int = BENCH_REPEATS) -> float:
    """Fastest µs of the fixed Python workload (about 10 ms on a current server core)."""
    return fastest_us(lambda: _workload(BENCH_ROUNDS), repeats)


def dispatch_bench_us(repeats: int = BENCH_REPEATS) -> float:
    """Fastest µs of DISPATCH_CALLS torch.add calls on 4-element CPU tensors. Call it outside any torch mode
    (a capture session's FakeTensorMode would make them fake-tensor calls)."""
    import torch

    a, b = torch.ones(4), torch.ones(4)

    def loop() -> None:
        for _ in range(DISPATCH_CALLS):
            torch.add(a, b)

    return fastest_us(loop, repeats)


def module_bench_us(repeats: int = BENCH_REPEATS) -> float:
    """Fastest µs of MODULE_CALLS calls of an nn.Identity module (outside any torch mode, as dispatch_bench_us)."""
    import torch

    a, identity = torch.ones(4), torch.nn.Identity()

    def loop() -> None:
        for _ in range(MODULE_CALLS):
            identity(a)

    return fastest_us(loop, repeats)


# A capture whose thread waited for a core this long per unit of CPU time it ran (other processes wanted the
# machine's cores) read its model Python on a loaded machine. CPU time leaves the waits out, but the readings
# still came out high on the 2-core development machine, by up to LOADED_PYTHON_INFLATION with both cores held
# by busy loops (benchmarks/host_determinism.py: model Python 1.16x, 1.55x and 1.87x its idle reading on the MLP
# step, GPT-2 forward and the GPT training step); predict lowers the model Python's range by it. Idle captures
# there waited 0-1% (other agents' background work), loaded ones 84-87% (GPT-2 forward, 2 busy loops).
BUSY_WAIT_SHARE = 0.1
LOADED_PYTHON_INFLATION = 0.9

SCHEDSTAT = Path("/proc/thread-self/schedstat")  # Linux: "<ns on a CPU> <ns waiting for one> <timeslices>"


def cpu_and_wait_ns() -> tuple[int, int] | None:
    """This thread's ns run on a CPU and ns spent runnable, waiting for one (other processes' load); None
    where the kernel does not say (not Linux, or schedstats off)."""
    try:
        ran, waited = SCHEDSTAT.read_text().split()[:2]
        return int(ran), int(waited)
    except (OSError, ValueError):
        return None


def wait_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float:
    """ns waited for a core per ns run between two cpu_and_wait_ns() readings (0 where unknown)."""
    if before is None or after is None or after[0] <= before[0]:
        return 0.0
    return (after[1] - before[1]) / (after[0] - before[0])


def cpu_model() -> str:
    """This machine's CPU, as "<model name>, <n> cores" (/proc/cpuinfo on Linux, else platform.processor())."""
    name = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name or platform.processor() or 'unknown CPU'}, {os.cpu_count()} cores"


@dataclass(frozen=True)
class CpuBench:
    """One machine's three microbenchmarks (µs, fastest run) and its CPU. The JSON names are zoo_measure's."""

    python_us: float = 0.0
    dispatch_us: float = 0.0  # 0: not measured
    module_us: float = 0.0
    cpu: str = ""

    def to_json(self) -> dict:
        return {"python_bench_us": self.python_us, "dispatch_add_2000_us": self.dispatch_us,
                "module_call_5000_us": self.module_us, "cpu": self.cpu}

    @staticmethod
    def from_json(d: dict) -> "CpuBench":
        return CpuBench(python_us=float(d.get("python_bench_us", 0.0)),
                        dispatch_us=float(d.get("dispatch_add_2000_us", 0.0)),
                        module_us=float(d.get("module_call_5000_us", 0.0)), cpu=str(d.get("cpu", "")))

    def ratios_to(self, other: "CpuBench") -> tuple[float, ...]:
        """other's time over this one's, per benchmark both measured (python first): how much longer the same
        CPU work takes on `other`."""
        pairs = ((self.python_us, other.python_us), (self.dispatch_us, other.dispatch_us),
                 (self.module_us, other.module_us))
        return tuple(theirs / mine for mine, theirs in pairs if mine > 0 and theirs > 0)


def measure_cpu_bench() -> CpuBench:
    return CpuBench(python_us=round(python_bench_us(), 1), dispatch_us=round(dispatch_bench_us(), 1),
                    module_us=round(module_bench_us(), 1), cpu=cpu_model())


@functools.lru_cache(maxsize=1)
def this_machine_bench() -> CpuBench:
    """Measured once per process (about 0.1 s), before the first capture session starts."""
    return measure_cpu_bench()


def this_machine_bench_us() -> float:
    return this_machine_bench().python_us
