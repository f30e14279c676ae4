"""The expected ledger: what each host and consumer should hold, from flavors alone.

A phase says which flavor each host holds for whom (``Holding``) and which
domains run there; the numbers (pinned pCPUs, hugepages per size, legacy
counters, placement resources) follow from the scenario's flavors and the
hosts Nova chose, never from a hand-written table.
"""
from __future__ import annotations

import collections
import dataclasses

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.scenario import Flavor


@dataclasses.dataclass(frozen=True)
class Holding:
    """``host`` holds ``flavor`` for ``server``'s ``consumer`` ("instance" or "migration")."""

    host: str
    server: str
    consumer: str
    flavor: Flavor
    running: bool = True  # whether a running domain backs it (False: shut-off source)
    topology: str = "current"  # which NUMA topology Nova gave it: "current", the move's "old" or "new"


@dataclasses.dataclass(frozen=True)
class HostUsage:
    pinned: int
    pages: dict  # hugepage size KiB -> pages
    vcpus: int
    memory_mb: int
    small_pages: int = 0  # 4 KiB pages of NUMA guests without hugepages

    @classmethod
    def of(cls, flavors) -> "HostUsage":
        pages, small = collections.Counter(), 0
        for f in flavors:
            if f.page_size_kb:
                pages[f.page_size_kb] += f.memory_mb * 1024 // f.page_size_kb
            elif f.numa:  # Nova places its memory in host cells, from the small pages
                small += f.memory_mb * 1024 // 4
        return cls(sum(f.dedicated_vcpus for f in flavors), dict(pages),
                   sum(f.vcpus for f in flavors), sum(f.memory_mb for f in flavors), small)


def pci_demand(flavor: Flavor, aliases: dict) -> dict:
    """The PCI devices a flavor asks for, by kind and vendor:product (``"VF 8086:1515"``): its
    ``pci_passthrough:alias`` counts through the cloud's aliases ({} without)."""
    from fake_driver.pci import flavor_aliases
    out: collections.Counter = collections.Counter()
    for name, count in flavor_aliases(flavor.extra_specs).items():
        alias = aliases[name]
        out[device_label(alias)] += count
    return dict(sorted(out.items()))


#: numa policies that bind a device to the guest's cells (legacy: when the device has one)
STRICT = ("required", "legacy")


def pci_bound(flavor: Flavor, aliases: dict) -> set:
    """The device labels a flavor asks for that must lie in its guest's cells: its
    ``hw:pci_numa_affinity_policy``, else each alias's ``numa_policy`` (Nova's default:
    legacy), is required or legacy -- for every alias of the label."""
    from fake_driver.pci import flavor_aliases
    policies = collections.defaultdict(set)
    for name in flavor_aliases(flavor.extra_specs):
        alias = aliases[name]
        policies[device_label(alias)].add(flavor.extra_specs.get("hw:pci_numa_affinity_policy")
                                          or alias.get("numa_policy", "legacy"))
    return {label for label, p in policies.items() if p <= set(STRICT)}


def device_label(alias: dict) -> str:
    """``"VF 8086:1515"``: how the ledger and the PCI views name a kind of device."""
    return (f"{alias['device_type'].replace('type-', '')} "
            f"{alias['vendor_id']}:{alias['product_id']}")


def pci_resource_class(label: str) -> str:
    """Placement's resource class of a device (Nova's pci_placement_translator)."""
    vendor, product = label.split(" ")[1].split(":")
    return f"CUSTOM_PCI_{vendor}_{product}".upper()


def placement_resources(flavor: Flavor) -> dict:
    out = {"PCPU": flavor.dedicated_vcpus, "VCPU": flavor.shared_vcpus,
           "MEMORY_MB": flavor.memory_mb, "DISK_GB": flavor.disk_gb}
    return {k: v for k, v in sorted(out.items()) if v}


@dataclasses.dataclass(frozen=True)
class Phase:
    """A named point of the scenario and what it holds where.

    ``status``: server -> (server status, migration status or None); a server
    status of None means "anything but ERROR" (mid-operation), "DELETED"
    means the API must no longer know the server, "ANY" anything at all (a
    crash may leave ERROR; the accounting must still match). ``holdings`` None: the
    phase is a step between two settled phases; then each host must hold
    exactly what one of ``between`` says it holds (the step has done its
    work there or not yet), and placement exactly one of theirs.
    """

    name: str
    holdings: tuple | None
    status: dict
    between: tuple = ()  # (Phase, Phase): the settled phases around a step
    recovered: bool = False  # after a host died and restarted: nothing of a move may be left

    def held(self, host: str) -> HostUsage:
        return HostUsage.of([h.flavor for h in self.holdings if h.host == host])

    def running(self, host: str) -> HostUsage:
        return HostUsage.of([h.flavor for h in self.holdings if h.host == host and h.running])

    def shadowed(self, host: str) -> bool:
        """A same-host move: the old flavor is held with no domain of its own.

        The destination domain replaces the source one (same name), so the
        host's defined domains cannot account for every pCPU the tracker holds.
        """
        instances = {h.server for h in self.holdings if h.host == host and h.consumer == "instance"}
        return any(h.host == host and h.consumer == "migration" and h.server in instances
                   for h in self.holdings)

    def pci_held(self, host: str, aliases: dict, running_only: bool = False) -> dict:
        """server -> device label -> how many devices ``host`` holds for it (both consumers)."""
        out: dict = collections.defaultdict(collections.Counter)
        for h in self.holdings:
            if h.host == host and (h.running or not running_only):
                out[h.server].update(pci_demand(h.flavor, aliases))
        return {s: dict(sorted(c.items())) for s, c in sorted(out.items()) if +c}

    def pci_allocations(self, aliases: dict, in_placement: dict) -> dict:
        """consumer -> host -> PCI resource class -> count, on the hosts that report PCI
        in placement (``in_placement``: host -> bool)."""
        out: dict = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
        for h in self.holdings:
            if not in_placement.get(h.host):
                continue
            for label, n in pci_demand(h.flavor, aliases).items():
                out[f"{h.server} {h.consumer}"][h.host][pci_resource_class(label)] += n
        return {c: {h: dict(sorted(r.items())) for h, r in sorted(hosts.items())}
                for c, hosts in sorted(out.items())}

    def allocations(self) -> dict:
        """consumer ("vm1 instance") -> host -> resources (summed if one host holds twice)."""
        out: dict = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
        for h in self.holdings:
            out[f"{h.server} {h.consumer}"][h.host].update(placement_resources(h.flavor))
        return {c: {h: dict(sorted(r.items())) for h, r in hosts.items()} for c, hosts in out.items()}


def phase(scenario, placed: dict, moved: dict, name: str, stepping: str | None = None) -> Phase:
    """The ledger of phase ``name``: the scenario's operation knows its phases.

    ``placed``: server -> host it booted on; ``moved``: server -> host its
    move went to (both as Nova chose them).
    """
    return scenario.operation.phase(scenario, placed, moved, name, stepping)
