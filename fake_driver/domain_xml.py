"""What a libvirt domain definition asks of its host.

Reads the parts of the XML the real LibvirtDriver writes for NUMA guests:
``cputune/vcpupin`` (pinned pCPUs), ``cpu/numa/cell`` (guest cell memory),
``numatune/memnode`` (guest cell -> host cell) and
``memoryBacking/hugepages/page`` (page size per guest cell).
"""
from __future__ import annotations

import collections
import dataclasses
import xml.etree.ElementTree as ET

from fake_driver.topology import parse_cpu_set

_UNIT_KB = {"k": 1, "kib": 1, "kb": 1, "m": 1024, "mib": 1024, "mb": 1024,
            "g": 1024 ** 2, "gib": 1024 ** 2, "gb": 1024 ** 2}


@dataclasses.dataclass(frozen=True)
class Claim:
    """The exclusive resources one domain holds on its host.

    ``cpus``: host cell -> frozenset of exclusively pinned pCPUs;
    ``pages``: (host cell, page size KiB) -> number of pages.
    """

    cpus: dict
    pages: dict

    @property
    def empty(self) -> bool:
        return not any(self.cpus.values()) and not any(self.pages.values())


def _kib(value: str, unit: str | None) -> int:
    return int(value) * _UNIT_KB[(unit or "KiB").lower()]


def parse_claim(xml: str, dedicated: frozenset, cell_of) -> Claim:
    """Return the :class:`Claim` of the domain defined by ``xml``.

    :param dedicated: host pCPUs that may be pinned exclusively; a vCPU pinned
        to exactly one of them owns it, any other pin floats (shared policy).
    :param cell_of: maps a host pCPU to its host NUMA cell id.
    :raises ValueError: malformed XML or a reference the XML cannot resolve.
    """
    root = ET.fromstring(xml)
    cpus: dict[int, set] = collections.defaultdict(set)
    for pin in root.findall("./cputune/vcpupin"):
        pcpus = parse_cpu_set(pin.get("cpuset"), "vcpupin")
        for pcpu in pcpus:
            cell_of(pcpu)  # raises KeyError for a pCPU the host does not have
        if len(pcpus) == 1 and pcpus <= dedicated:
            (pcpu,) = pcpus
            cpus[cell_of(pcpu)].add(pcpu)

    guest_mem = {int(c.get("id")): _kib(c.get("memory"), c.get("unit"))
                 for c in root.findall("./cpu/numa/cell")}
    host_cell = {}
    for memnode in root.findall("./numatune/memnode"):
        nodes = parse_cpu_set(memnode.get("nodeset"), "memnode")
        if len(nodes) != 1:
            raise ValueError(f"memnode cellid={memnode.get('cellid')} spans host cells {sorted(nodes)}")
        host_cell[int(memnode.get("cellid"))] = next(iter(nodes))

    pages: dict[tuple, int] = collections.Counter()
    for page in root.findall("./memoryBacking/hugepages/page"):
        size_kb = _kib(page.get("size"), page.get("unit"))
        if size_kb <= 4:
            continue  # small pages are not a hugepage pool
        nodeset = page.get("nodeset")
        guest_cells = parse_cpu_set(nodeset, "page nodeset") if nodeset else guest_mem.keys()
        for gcell in guest_cells:
            if gcell not in guest_mem or gcell not in host_cell:
                raise ValueError(f"hugepages for guest cell {gcell} without cpu/numa cell or memnode")
            pages[(host_cell[gcell], size_kb)] += guest_mem[gcell] // size_kb
    return Claim({c: frozenset(s) for c, s in cpus.items()}, dict(pages))
