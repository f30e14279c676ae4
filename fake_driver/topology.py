"""Declarative host topology: NUMA cells, CPUs, dedicated/shared sets, hugepages,
PCI devices (:mod:`fake_driver.pci`).

Pure data with eager validation, so a malformed topology is refused with one
line naming the host and field before Nova is even imported.
"""
from __future__ import annotations

import dataclasses

from fake_driver.pci import devices_from_list
from harness.errors import InvalidTopology

#: page sizes (KiB) a topology may declare pools for, by their TOML names
PAGE_SIZES_KB = {"2M": 2048, "1G": 1048576}


def parse_cpu_set(spec: str, where: str) -> frozenset[int]:
    """Parse a libvirt/Nova style CPU list such as ``"0-3,6"``."""
    cpus: set[int] = set()
    if spec is None or str(spec).strip() == "":
        return frozenset()
    for part in str(spec).split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if lo > hi:
                    raise ValueError
                cpus.update(range(lo, hi + 1))
            else:
                cpus.add(int(part))
        except ValueError:
            raise InvalidTopology(f"{where}: bad CPU list {spec!r}") from None
    return frozenset(cpus)


def format_cpu_set(cpus) -> str:
    """Inverse of :func:`parse_cpu_set` (``{0,1,2,5}`` -> ``"0-2,5"``)."""
    out, run = [], []
    for cpu in sorted(cpus):
        if run and cpu == run[-1] + 1:
            run.append(cpu)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [cpu]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


@dataclasses.dataclass(frozen=True)
class Cell:
    """One NUMA cell: its pCPU ids, memory and hugepage pools (KiB -> count)."""

    id: int
    cpus: tuple[int, ...]
    memory_mb: int
    hugepages: dict  # page size KiB -> number of pages


#: the small page size: a guest cell without hugepages is backed by these
SMALL_PAGE_KB = 4


@dataclasses.dataclass(frozen=True)
class HostTopology:
    """A compute host as the fake libvirt exposes it."""

    name: str
    sockets: int
    cores: int
    threads: int
    cells: tuple[Cell, ...]
    pci: tuple = ()  # fake_driver.pci.PciDevice, by address

    @property
    def cpus(self) -> frozenset:
        return frozenset(c for cell in self.cells for c in cell.cpus)

    def cell_of(self, cpu: int) -> int:
        for cell in self.cells:
            if cpu in cell.cpus:
                return cell.id
        raise KeyError(cpu)

    def pages_total(self, cell_id: int, size_kb: int) -> int:
        """Pages of ``size_kb`` in the cell; 4 KiB: the memory no hugepage pool takes."""
        cell = self.cells[cell_id]
        if size_kb == SMALL_PAGE_KB:
            huge = sum(size * n for size, n in cell.hugepages.items())
            return (cell.memory_mb * 1024 - huge) // SMALL_PAGE_KB
        return cell.hugepages.get(size_kb, 0)


_HOST_KEYS = {"name", "cells", "sockets", "cores", "threads", "memory_mb",
              "hugepages", "pci"}


def _int(raw: dict, key: str, where: str, default=None, minimum=1) -> int:
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidTopology(
            f"{where}: {key!r} must be an integer >= {minimum}, got {value!r}")
    return value


def host_from_dict(raw: dict, where: str = "host") -> HostTopology:
    """Build and validate a :class:`HostTopology` from its TOML table.

    Keys: ``name``, ``cells``, ``sockets`` (per cell), ``cores`` (per
    socket), ``threads`` (per core), ``memory_mb`` (per cell) and
    ``hugepages``: a table
    of page size (``"2M"``/``"1G"``) to a list of page counts, one per cell;
    ``pci``: a list of device tables (:func:`fake_driver.pci.devices_from_list`).
    """
    if not isinstance(raw, dict):
        raise InvalidTopology(f"{where}: expected a table, got {raw!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidTopology(f"{where}: 'name' must be a non-empty string")
    where = f"{where} {name!r}"
    unknown = set(raw) - _HOST_KEYS
    if unknown:
        raise InvalidTopology(
            f"{where}: unknown key(s) {sorted(unknown)}; valid: {sorted(_HOST_KEYS)}")
    ncells = _int(raw, "cells", where, default=1)
    sockets = _int(raw, "sockets", where, default=1)
    cores = _int(raw, "cores", where)
    threads = _int(raw, "threads", where, default=1)
    memory_mb = _int(raw, "memory_mb", where, default=8192, minimum=256)
    per_cell = sockets * cores * threads
    if ncells * per_cell > 64:
        raise InvalidTopology(f"{where}: {ncells * per_cell} CPUs; at most 64 supported")
    pools = raw.get("hugepages", {})
    if not isinstance(pools, dict):
        raise InvalidTopology(f"{where}: 'hugepages' must be a table")
    counts: dict[int, list[int]] = {}
    for size_name, per_cell_counts in pools.items():
        if size_name not in PAGE_SIZES_KB:
            raise InvalidTopology(
                f"{where}: hugepage size {size_name!r} unknown; valid: {sorted(PAGE_SIZES_KB)}")
        if (not isinstance(per_cell_counts, list) or len(per_cell_counts) != ncells
                or not all(isinstance(n, int) and n >= 0 for n in per_cell_counts)):
            raise InvalidTopology(
                f"{where}: hugepages.{size_name} must list {ncells} non-negative counts, one per cell")
        counts[PAGE_SIZES_KB[size_name]] = per_cell_counts
    cells = []
    for cell_id in range(ncells):
        cpus = tuple(range(cell_id * per_cell, (cell_id + 1) * per_cell))
        pages = {size: n[cell_id] for size, n in counts.items() if n[cell_id]}
        huge_mb = sum(size * n for size, n in pages.items()) // 1024
        if huge_mb > memory_mb:
            raise InvalidTopology(
                f"{where}: cell {cell_id} hugepages need {huge_mb} MiB but the cell has {memory_mb} MiB")
        cells.append(Cell(cell_id, cpus, memory_mb, pages))
    pci = devices_from_list(raw.get("pci", []), ncells, where)
    return HostTopology(name, sockets, cores, threads, tuple(cells), pci)


@dataclasses.dataclass(frozen=True)
class CpuSets:
    """``[compute] cpu_dedicated_set`` / ``cpu_shared_set``.

    Cloud-wide, because an in-process cloud shares one oslo.config ``CONF``
    between its compute services; hosts still differ in cells, cores and
    hugepage pools.
    """

    dedicated: frozenset
    shared: frozenset


def cpu_sets_from_dict(raw: dict, hosts, where: str = "cloud") -> CpuSets:
    dedicated = parse_cpu_set(raw.get("cpu_dedicated_set", ""), f"{where}: cpu_dedicated_set")
    shared = parse_cpu_set(raw.get("cpu_shared_set", ""), f"{where}: cpu_shared_set")
    if dedicated & shared:
        raise InvalidTopology(
            f"{where}: CPUs {format_cpu_set(dedicated & shared)} are in both "
            "cpu_dedicated_set and cpu_shared_set")
    if not dedicated and not shared:
        raise InvalidTopology(f"{where}: set cpu_dedicated_set and/or cpu_shared_set")
    for host in hosts:
        missing = (dedicated | shared) - host.cpus
        if missing:
            raise InvalidTopology(
                f"{where}: host {host.name!r} has no CPUs {format_cpu_set(missing)} "
                f"named in the cpu sets (it has {format_cpu_set(host.cpus)})")
    return CpuSets(dedicated, shared)
