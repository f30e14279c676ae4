"""The expected ledger: what each host and consumer should hold, from flavors alone.

A phase says which flavor each host holds for whom (``Holding``) and which
domains run or are defined there; the numbers (pinned pCPUs, hugepages per
size, legacy counters, placement resources) follow from the flavors and
never from a hand-written table.
"""
from __future__ import annotations

import collections
import dataclasses

from harness.scenario import Flavor


@dataclasses.dataclass(frozen=True)
class Holding:
    """``host`` holds ``flavor`` for ``consumer`` ("instance" or "migration")."""

    host: str
    consumer: str
    flavor: Flavor
    running: bool = True  # whether a running domain backs it (False: shut-off source)


@dataclasses.dataclass(frozen=True)
class HostUsage:
    pinned: int
    pages: dict  # size KiB -> pages
    vcpus: int
    memory_mb: int

    @classmethod
    def of(cls, flavors) -> "HostUsage":
        pages = collections.Counter()
        for f in flavors:
            if f.page_size_kb:
                pages[f.page_size_kb] += f.memory_mb * 1024 // f.page_size_kb
        return cls(sum(f.vcpus for f in flavors if f.dedicated), dict(pages),
                   sum(f.vcpus for f in flavors), sum(f.memory_mb for f in flavors))


def placement_resources(flavor: Flavor) -> dict:
    cpu_class = "PCPU" if flavor.dedicated else "VCPU"
    return {cpu_class: flavor.vcpus, "MEMORY_MB": flavor.memory_mb, "DISK_GB": flavor.disk_gb}


@dataclasses.dataclass(frozen=True)
class Phase:
    """A named point of the scenario and what it holds where."""

    name: str
    holdings: tuple[Holding, ...]
    server_status: str | None  # None: anything but ERROR (mid-operation)
    migration_status: str | None = None

    def held(self, host: str) -> HostUsage:
        return HostUsage.of([h.flavor for h in self.holdings if h.host == host])

    def running(self, host: str) -> HostUsage:
        return HostUsage.of([h.flavor for h in self.holdings if h.host == host and h.running])

    def allocations(self) -> dict:
        """consumer kind -> host -> resources."""
        out: dict = collections.defaultdict(dict)
        for h in self.holdings:
            out[h.consumer][h.host] = placement_resources(h.flavor)
        return dict(out)


def phases(scenario, source: str, dest: str) -> dict:
    """The ledger of every phase of a boot + resize scenario, by phase name."""
    boot, resize = scenario.steps
    old, new = scenario.flavors[boot.flavor], scenario.flavors[resize.flavor]
    return {
        "after-boot": Phase("after-boot", (Holding(source, "instance", old),), "ACTIVE"),
        "verify-resize": Phase(
            "verify-resize",
            (Holding(source, "migration", old, running=False), Holding(dest, "instance", new)),
            "VERIFY_RESIZE", "finished"),
        "after-confirm": Phase("after-confirm", (Holding(dest, "instance", new),),
                               "ACTIVE", "confirmed"),
        "after-revert": Phase("after-revert", (Holding(source, "instance", old),),
                              "ACTIVE", "reverted"),
    }


def in_resize(scenario, source: str, dest: str) -> Phase:
    """Mid-resize, between the destination's claim and confirm/revert.

    Both hosts hold their flavor throughout (the source the old one, for the
    migration; the destination the new one); domains come and go, so only
    "every running domain is tracked" is checked against the ground truth.
    """
    verify = phases(scenario, source, dest)["verify-resize"]
    return Phase("in-resize", verify.holdings, None, None)
