"""What a libvirt domain definition asks of its host.

Reads the parts of the XML the real LibvirtDriver writes for NUMA guests:
``cputune/vcpupin`` (pinned pCPUs), ``cpu/numa/cell`` (guest cell memory),
``numatune/memnode`` (guest cell -> host cell),
``memoryBacking/hugepages/page`` (page size per guest cell) and the PCI
functions passed through: ``devices/hostdev`` (a PF or plain device, or a
VF by flavor alias) and ``devices/interface type='hostdev'`` (a VF port).
"""
from __future__ import annotations

import collections
import dataclasses
import xml.etree.ElementTree as ET

from fake_driver.topology import SMALL_PAGE_KB, parse_cpu_set

_UNIT_KB = {"k": 1, "kib": 1, "kb": 1, "m": 1024, "mib": 1024, "mb": 1024,
            "g": 1024 ** 2, "gib": 1024 ** 2, "gb": 1024 ** 2}


@dataclasses.dataclass(frozen=True)
class Claim:
    """The exclusive resources one domain holds on its host.

    ``cpus``: host cell -> frozenset of exclusively pinned pCPUs;
    ``pages``: (host cell, page size KiB) -> number of pages, small (4 KiB)
    pages included: a NUMA guest's memory comes from its host cell either way;
    ``memory_kb``: host cell -> guest memory placed there;
    ``shared``: host cell -> vCPUs there that float over the shared set;
    ``pci``: the host PCI addresses (``0000:81:00.1``) passed through.
    """

    cpus: dict
    pages: dict
    memory_kb: dict = dataclasses.field(default_factory=dict)
    shared: dict = dataclasses.field(default_factory=dict)
    pci: frozenset = frozenset()


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
    exclusive = set()  # vCPUs with a pCPU of their own
    for pin in root.findall("./cputune/vcpupin"):
        pcpus = parse_cpu_set(pin.get("cpuset"), "vcpupin")
        for pcpu in pcpus:
            cell_of(pcpu)  # raises KeyError for a pCPU the host does not have
        if len(pcpus) == 1 and pcpus <= dedicated:
            (pcpu,) = pcpus
            cpus[cell_of(pcpu)].add(pcpu)
            exclusive.add(int(pin.get("vcpu")))

    numa = root.findall("./cpu/numa/cell")
    guest_mem = {int(c.get("id")): _kib(c.get("memory"), c.get("unit")) for c in numa}
    guest_vcpus = {int(c.get("id")): parse_cpu_set(c.get("cpus"), "numa cell cpus") for c in numa}
    host_cell = {}
    for memnode in root.findall("./numatune/memnode"):
        nodes = parse_cpu_set(memnode.get("nodeset"), "memnode")
        if len(nodes) != 1:
            raise ValueError(f"memnode cellid={memnode.get('cellid')} spans host cells {sorted(nodes)}")
        host_cell[int(memnode.get("cellid"))] = next(iter(nodes))

    page_of = {}  # guest cell -> page size backing it
    for page in root.findall("./memoryBacking/hugepages/page"):
        size_kb = _kib(page.get("size"), page.get("unit"))
        nodeset = page.get("nodeset")
        for gcell in parse_cpu_set(nodeset, "page nodeset") if nodeset else guest_mem.keys():
            if gcell not in guest_mem or gcell not in host_cell:
                raise ValueError(f"hugepages for guest cell {gcell} without cpu/numa cell or memnode")
            page_of[gcell] = size_kb
    pages: dict[tuple, int] = collections.Counter()
    memory: dict[int, int] = collections.Counter()
    shared: dict[int, int] = collections.Counter()
    for gcell, kib in guest_mem.items():
        if gcell not in host_cell:
            continue  # not placed in a host cell: nothing of it is held per cell
        cell = host_cell[gcell]
        size_kb = page_of.get(gcell, SMALL_PAGE_KB)
        pages[(cell, size_kb)] += kib // size_kb
        memory[cell] += kib
        shared[cell] += len(guest_vcpus[gcell] - exclusive)
    return Claim({c: frozenset(s) for c, s in cpus.items()}, dict(pages),
                 dict(memory), {c: n for c, n in shared.items() if n}, pci_addresses(root))


def pci_addresses(root) -> frozenset:
    """Host PCI addresses of the domain's ``<hostdev type='pci'>`` and
    ``<interface type='hostdev'>`` sources (libvirt's hex attributes)."""
    sources = (root.findall("./devices/hostdev[@type='pci']/source/address")
               + root.findall("./devices/interface[@type='hostdev']/source/address"))
    return frozenset("%04x:%02x:%02x.%x" % tuple(int(a.get(k) or "", 16) for k in (
        "domain", "bus", "slot", "function")) for a in sources)
