"""Collective time on an interconnect: latency + message / bandwidth, for the algorithm NCCL would pick.

Bandwidth follows nccl-tests' bus-bandwidth definitions (NVIDIA/nccl-tests, doc/PERFORMANCE.md): a collective
of S bytes among n ranks, each with bus bandwidth B, takes at best

    all_reduce       t = S/B * 2(n-1)/n
    all_gather       t = S/B * (n-1)/n        (S: the whole gathered buffer)
    reduce_scatter   t = S/B * (n-1)/n        (S: the whole input buffer)
    all_to_all       t = S/B * (n-1)/n
    broadcast/reduce t = S/B

B is the interconnect's per-direction bandwidth times its bus efficiency (devices/interconnects.toml).

Algorithm and protocol: NCCL predicts a time for every (algorithm, protocol) pair it may use, as latency +
S / algorithm bandwidth, and runs the fastest (NVIDIA/nccl src/graph/tuning.cc, ncclTopoTuneModel and
ncclTopoGetAlgoTime). This module does the same with the pairs that matter without NVLink SHARP or CollNet:
ring for every collective, tree for all_reduce only (NCCL has no tree for the others), each with the LL
(low latency, a fraction of the bandwidth), LL128 (NVLink only) and Simple protocols. Small messages are
latency-bound and go to LL and, across many nodes, to the tree (log2 of the node count in hops, not n);
large ones go to ring/Simple, which reaches the full bus bandwidth. The latencies and protocol factors are
NCCL's own tuning figures (tuning.cc at NVIDIA/nccl commit b6475625, the 2.18/2.19 releases), quoted below.

Where the link has collectives measured on it (interconnects.toml [<id>.measured], a fit to the device's sweep
at some number of ranks), that fit times the collective instead: latency + bus bytes / measured bus bandwidth,
for the measured collectives at the measured rank count ("measured"). At another rank count on the same link
the measured bandwidth is kept (nccl-tests' bus bandwidth is defined to be independent of the rank count)
and the latency grows by NCCL's per-hop latency for the extra ring steps ("measured, scaled to n ranks":
unvalidated). Collectives never measured keep NCCL's tuning model with the datasheet bandwidth and the
assumed bus efficiency, as do links without a measurement (InfiniBand, PCIe): unvalidated.

Not modelled: NVLS / CollNet, NCCL's per-channel bandwidth caps, the SMs an NCCL kernel takes from compute
running beside it, and contention between collectives on different streams (they share one NCCL stream here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernelcast.costs import Cost
from kernelcast.costs.collectives import COLLECTIVE_KIND
from kernelcast.devices.interconnects import Interconnect, MeasuredCollective

from .kernel_model import KernelEstimate

ALGORITHMS = ("ring", "tree")
PROTOCOLS = ("ll", "ll128", "simple")

# NCCL's base latency per (algorithm, protocol), us (tuning.cc baseLat).
NCCL_BASE_LATENCY_US = {
    ("tree", "ll"): 6.8, ("tree", "ll128"): 14.0, ("tree", "simple"): 0.0,
    ("ring", "ll"): 6.6, ("ring", "ll128"): 14.0, ("ring", "simple"): 8.4,
}
# NCCL's latency per hop (per step of the algorithm) by link class, us (tuning.cc hwLat).
NCCL_HOP_LATENCY_US = {
    "nvlink": {("tree", "ll"): 0.6, ("tree", "ll128"): 1.25, ("tree", "simple"): 28.0,
               ("ring", "ll"): 0.6, ("ring", "ll128"): 1.9, ("ring", "simple"): 3.4},
    "pci": {("tree", "ll"): 1.0, ("tree", "ll128"): 1.9, ("tree", "simple"): 28.0,
            ("ring", "ll"): 1.0, ("ring", "ll128"): 2.5, ("ring", "simple"): 5.7},
    "net": {("tree", "ll"): 5.0, ("tree", "ll128"): 8.5, ("tree", "simple"): 28.0,
            ("ring", "ll"): 2.7, ("ring", "ll128"): 4.0, ("ring", "simple"): 14.0},
}
# Share of the bus bandwidth each protocol reaches (tuning.cc): LL sends 8-byte lines of 4 data + 4 flag bytes
# and NCCL rates its ring at 1/4 of the bus bandwidth for all_reduce (and anything across nodes), 1/3 for the
# other collectives inside a node; tree LL at 1/3.8. LL128 at 0.92 (120 of 128 bytes are data) on rings, 7/9
# on a tree inside one node and 120/128 across nodes.
RING_LL_SHARE_ALL_REDUCE = 1 / 4
RING_LL_SHARE_OTHER = 1 / 3
TREE_LL_SHARE = 1 / 3.8
RING_LL128_SHARE = 0.92
TREE_LL128_SHARE_ONE_NODE = 7 / 9
TREE_LL128_SHARE_NODES = 120 / 128
# LL's bus bandwidth never exceeds this (tuning.cc llMaxBws, Hopper and Ampere inside one node: 87.7 GB/s).
LL_MAX_BUS_BW_BYTES_PER_S = 87.7e9
# NCCL's tree reaches 0.92 of the ring's bus bandwidth, and its algorithm bandwidth is half its bus bandwidth
# (every byte goes up the tree, reduced, and down again).
TREE_BUS_SHARE = 0.92
TREE_ALGBW_PER_BUSBW = 0.5
# LL128 is enabled by default only where every GPU-to-GPU path is NVLink (tuning.cc, pEnable for LL128).
LL128_LINKS = ("nvlink",)
# Behind a network entry sit nodes of ranks_per_node GPUs (HGX boards): hops inside a node take NVLink's
# latency, hops between nodes the network's, as NCCL counts them (tuning.cc: intraLat and interLat).
NODE_INTERNAL_HW = "nvlink"

# nccl-tests' bus-bandwidth factor per collective: bus bytes = S * factor(n).
BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


@dataclass(frozen=True)
class CommEstimate:
    """One collective's predicted time, and the reasons for it."""

    collective: str
    message_bytes: int
    group_size: int
    algorithm: str  # "ring" / "tree" / "none" (a group of one moves nothing)
    protocol: str  # "ll" / "ll128" / "simple" / "none"
    latency_us: float
    bandwidth_us: float
    bus_bw_bytes_per_s: float  # the bus bandwidth the chosen protocol reaches

    @property
    def time_us(self) -> float:
        return self.latency_us + self.bandwidth_us

    @property
    def algbw_bytes_per_s(self) -> float:
        """S / t, as nccl-tests' algbw column."""
        return self.message_bytes / (self.time_us * 1e-6) if self.time_us else 0.0

    @property
    def busbw_bytes_per_s(self) -> float:
        """algbw times the collective's bus factor, as nccl-tests' busbw column."""
        return self.algbw_bytes_per_s * BUS_FACTOR[self.collective](self.group_size)


def bus_bytes(collective: str, message_bytes: float, n: int) -> float:
    """Bytes that cross each rank's link, by nccl-tests' definitions."""
    return message_bytes * BUS_FACTOR[collective](n)


def ring_steps(collective: str, n: int) -> int:
    """Hops one chunk makes around the ring: reduce-scatter then all-gather for all_reduce (2(n-1)), one pass
    for all_gather / reduce_scatter (n-1), the pipeline's length for broadcast / reduce (n-1), and one
    round of sends to every peer at once for all_to_all (NCCL runs it as grouped point-to-point)."""
    if collective == "all_reduce":
        return 2 * (n - 1)
    if collective == "all_to_all":
        return 1
    return n - 1


def nodes_of(link: Interconnect, n: int) -> tuple[int, int]:
    """(nodes, ranks per node) of n ranks: one node inside NVLink / PCIe; n / ranks_per_node over a network."""
    if link.ranks_per_node <= 0:
        return 1, n
    per_node = min(n, link.ranks_per_node)
    return math.ceil(n / per_node), per_node


def protocol_bus_bw(link: Interconnect, algorithm: str, protocol: str, collective: str, nodes: int) -> float:
    """Bus bandwidth the (algorithm, protocol) pair reaches on this link, bytes/s; 0: not available."""
    bus = link.bus_bw_bytes_per_s
    if protocol == "ll128" and link.nccl_hw not in LL128_LINKS:
        return 0.0
    if algorithm == "ring":
        if protocol == "ll":
            share = RING_LL_SHARE_ALL_REDUCE if (collective == "all_reduce" or nodes > 1) else RING_LL_SHARE_OTHER
            return min(bus * share, LL_MAX_BUS_BW_BYTES_PER_S)
        return bus * RING_LL128_SHARE if protocol == "ll128" else bus
    tree = bus * TREE_BUS_SHARE
    if protocol == "ll":
        return min(tree * TREE_LL_SHARE, LL_MAX_BUS_BW_BYTES_PER_S)
    if protocol == "ll128":
        return tree * (TREE_LL128_SHARE_ONE_NODE if nodes == 1 else TREE_LL128_SHARE_NODES)
    return tree


def ring_steps_between_nodes(collective: str, nodes: int) -> int:
    """Of a ring's steps, those that cross from one node to the next (tuning.cc nInterSteps)."""
    if nodes <= 1:
        return 0
    return 2 * nodes if collective == "all_reduce" else nodes - 1


def latency_us(link: Interconnect, algorithm: str, protocol: str, collective: str, n: int) -> float:
    """NCCL's latency term: a base per (algorithm, protocol) plus one hop latency per step. A ring makes
    ring_steps hops; a tree goes up and down: 2 * ((ranks per node - 1) + log2(nodes)) hops. Hops between
    nodes take the link's latency, hops inside a node NVLink's."""
    nodes, per_node = nodes_of(link, n)
    between = NCCL_HOP_LATENCY_US[link.nccl_hw][(algorithm, protocol)]
    inside = NCCL_HOP_LATENCY_US[NODE_INTERNAL_HW if link.ranks_per_node > 0 else link.nccl_hw][(algorithm, protocol)]
    base = NCCL_BASE_LATENCY_US[(algorithm, protocol)]
    if algorithm == "ring":
        steps, crossing = ring_steps(collective, n), ring_steps_between_nodes(collective, nodes)
        return base + (steps - crossing) * inside + crossing * between
    return base + 2 * ((per_node - 1) * inside + math.log2(nodes) * between)


def bandwidth_us(link: Interconnect, algorithm: str, protocol: str, collective: str, message_bytes: float,
                 n: int) -> float:
    """Time to move the bytes: bus bytes / bus bandwidth on a ring; S / (bus bandwidth / 2) on a tree."""
    nodes, _ = nodes_of(link, n)
    bw = protocol_bus_bw(link, algorithm, protocol, collective, nodes)
    if bw <= 0:
        return math.inf
    if algorithm == "ring":
        return bus_bytes(collective, message_bytes, n) / bw * 1e6
    return message_bytes / (bw * TREE_ALGBW_PER_BUSBW) * 1e6


def candidates(collective: str) -> list[tuple[str, str]]:
    algorithms = ALGORITHMS if collective == "all_reduce" else ("ring",)
    return [(a, p) for a in algorithms for p in PROTOCOLS]


MEASURED = "measured"  # CommEstimate.algorithm of a collective timed by a measured fit


def measured_fit(collective: str, link: Interconnect) -> MeasuredCollective | None:
    return link.measured.collectives.get(collective) if link.measured is not None else None


def measured_time(collective: str, message_bytes: float, n: int, link: Interconnect,
                  fit: MeasuredCollective) -> CommEstimate:
    """The link's measured fit; at another rank count, plus NCCL's hop latency for the extra ring steps."""
    measured_ranks = link.measured.ranks
    latency = fit.latency_us
    protocol = "fit"
    if n != measured_ranks:
        extra = latency_us(link, "ring", "simple", collective, n) - latency_us(link, "ring", "simple", collective,
                                                                               measured_ranks)
        latency = max(latency + extra, 0.0)
        protocol = f"fit at {measured_ranks} ranks, scaled"
    moving = bus_bytes(collective, message_bytes, n) / fit.busbw_bytes_per_s * 1e6
    return CommEstimate(collective, int(message_bytes), n, MEASURED, protocol, latency, moving, fit.busbw_bytes_per_s)


def host_issue_us(collective: str, link: Interconnect) -> float | None:
    """CPU time from a collective's call to its kernel's launch on this link, where measured (else None)."""
    return link.measured.host_issue_us if measured_fit(collective, link) is not None else None


def call_host_us(collective: str, link: Interconnect) -> float | None:
    """CPU time of one collective call on this link, where measured (else None)."""
    return link.measured.call_host_us if measured_fit(collective, link) is not None else None


def collective_time(collective: str, message_bytes: float, n: int, link: Interconnect) -> CommEstimate:
    """The link's measured fit where it has one for this collective, else the fastest (algorithm, protocol)
    NCCL may use, as NCCL's tuner picks it."""
    if collective not in BUS_FACTOR:
        raise ValueError(f"unknown collective {collective!r}; known: {', '.join(BUS_FACTOR)}")
    if n <= 1 or message_bytes <= 0:
        return CommEstimate(collective, int(message_bytes), n, "none", "none", 0.0, 0.0, 0.0)
    fit = measured_fit(collective, link)
    if fit is not None and (link.ranks_per_node == 0 or n <= link.ranks_per_node):
        return measured_time(collective, message_bytes, n, link, fit)
    best: CommEstimate | None = None
    for algorithm, protocol in candidates(collective):
        moving = bandwidth_us(link, algorithm, protocol, collective, message_bytes, n)
        if math.isinf(moving):
            continue
        nodes, _ = nodes_of(link, n)
        estimate = CommEstimate(
            collective, int(message_bytes), n, algorithm, protocol,
            latency_us(link, algorithm, protocol, collective, n), moving,
            protocol_bus_bw(link, algorithm, protocol, collective, nodes))
        if best is None or estimate.time_us < best.time_us:
            best = estimate
    assert best is not None, "ring/simple is available on every link"
    return best


def collective_estimate(cost: Cost, link: Interconnect) -> tuple[KernelEstimate, CommEstimate]:
    """The KernelEstimate the timeline uses for a collective's Cost, and the CommEstimate behind it."""
    assert cost.kind == COLLECTIVE_KIND, cost.kind
    collective, message_bytes, group_size = cost.key
    comm = collective_time(collective, message_bytes, group_size, link)
    if comm.algorithm == MEASURED:
        roof = f"{link.id} measured ({comm.protocol})"
    else:
        roof = f"{link.id} {comm.algorithm}/{comm.protocol}" if comm.algorithm != "none" else link.id
    return KernelEstimate(comm.time_us, "comm", roof), comm
