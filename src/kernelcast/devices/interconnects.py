"""GPU-to-GPU links as data: interconnects.toml, with a datasheet source per entry."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from kernelcast.errors import UnknownInterconnectError

from . import GPU, find_by_name

DATA_FILE = "interconnects.toml"
NCCL_HW_CLASSES = ("nvlink", "pci", "net")  # NCCL's tuning model has latencies for these three


@dataclass(frozen=True)
class MeasuredCollective:
    """One collective's fit on a link: t = latency_us + bus bytes / busbw_bytes_per_s on the GPU."""

    latency_us: float
    busbw_bytes_per_s: float
    max_residual: float  # worst relative error of the fit over the sweep


@dataclass(frozen=True)
class LinkMeasurement:
    """Collectives measured on a link (interconnects.toml [<id>.measured])."""

    gpu: str
    ranks: int
    host_issue_us: float  # CPU time from the call to the kernel's launch (ProcessGroupNCCL)
    call_host_us: float  # CPU time of the whole call, launch and what follows it included
    collectives: dict[str, MeasuredCollective]
    source: str
    nccl: str = ""
    torch: str = ""
    date: str = ""

    @staticmethod
    def from_toml(entry: dict) -> "LinkMeasurement":
        fields = dict(entry)
        collectives = {k: MeasuredCollective(**fields.pop(k)) for k in list(fields) if isinstance(fields[k], dict)}
        return LinkMeasurement(collectives=collectives, **fields)


@dataclass(frozen=True)
class Interconnect:
    id: str
    name: str
    aliases: tuple[str, ...]
    nccl_hw: str
    bw_bytes_per_s: float  # one GPU, one direction (nccl-tests' B)
    bidirectional_bw_bytes_per_s: float  # the datasheet's total per GPU
    bus_efficiency: float  # share of bw a large collective's bus bandwidth reaches
    efficiency_source: str  # "assumed" until measured
    ranks_per_node: int  # GPUs per node for a network; 0 for links inside one node
    gpus: tuple[str, ...]
    source: str
    notes: str = ""
    measured: LinkMeasurement | None = None  # collectives measured on it, where they were

    @property
    def bus_bw_bytes_per_s(self) -> float:
        """The bus bandwidth NCCL's ring reaches on large messages: what nccl-tests' busbw column would read."""
        return self.bw_bytes_per_s * self.bus_efficiency


@lru_cache(maxsize=1)
def all_interconnects() -> dict[str, Interconnect]:
    raw = tomllib.loads(resources.files(__package__).joinpath(DATA_FILE).read_text())
    links = {}
    for link_id, entry in raw.items():
        fields = dict(entry)
        fields["aliases"] = tuple(fields.get("aliases", ()))
        fields["gpus"] = tuple(fields.get("gpus", ()))
        if "measured" in fields:
            fields["measured"] = LinkMeasurement.from_toml(fields["measured"])
        links[link_id] = Interconnect(id=link_id, **fields)
    return links


def get_interconnect(name: str) -> Interconnect:
    """Look an interconnect up by id or alias; an unknown name raises with the closest names."""
    links = all_interconnects()
    link, hint = find_by_name(name, links)
    if link is None:
        raise UnknownInterconnectError(f"unknown interconnect {name!r}{hint} (known: {', '.join(sorted(links))})")
    return link


def natural_interconnect(gpu: GPU) -> Interconnect:
    """The link a GPU's collectives use when nothing else is said: its NVLink where the catalogue lists one,
    else its host PCIe link. A GPU outside NCCL's world (AMD parts run RCCL over Infinity Fabric, which this
    catalogue does not hold) gets no guess."""
    links = all_interconnects()
    for link in links.values():
        if gpu.id in link.gpus:
            return link
    if gpu.vendor == "nvidia" and gpu.host_link in links:
        return links[gpu.host_link]
    raise UnknownInterconnectError(
        f"no GPU-to-GPU link data for {gpu.name}; pass --interconnect (known: {', '.join(sorted(links))})")
