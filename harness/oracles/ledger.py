"""The expected ledger: what each host and consumer should hold, from flavors alone.

A phase says which flavor each host holds for whom (``Holding``) and which
domains run there; the numbers (pinned pCPUs, hugepages per size, legacy
counters, placement resources) follow from the scenario's flavors and the
hosts Nova chose, never from a hand-written table.
"""
from __future__ import annotations

import collections
import dataclasses

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


def placement_resources(flavor: Flavor) -> dict:
    out = {"PCPU": flavor.dedicated_vcpus, "VCPU": flavor.shared_vcpus,
           "MEMORY_MB": flavor.memory_mb, "DISK_GB": flavor.disk_gb}
    return {k: v for k, v in sorted(out.items()) if v}


@dataclasses.dataclass(frozen=True)
class Phase:
    """A named point of the scenario and what it holds where.

    ``status``: server -> (server status, migration status or None); a server
    status of None means "anything but ERROR" (mid-operation), "DELETED"
    means the API must no longer know the server. ``holdings`` None: the
    phase is a step between two settled phases; then each host must hold
    exactly what one of ``between`` says it holds (the step has done its
    work there or not yet), and placement exactly one of theirs.
    """

    name: str
    holdings: tuple | None
    status: dict
    between: tuple = ()  # (Phase, Phase): the settled phases around a step

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

    def allocations(self) -> dict:
        """consumer ("vm1 instance") -> host -> resources (summed if one host holds twice)."""
        out: dict = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
        for h in self.holdings:
            out[f"{h.server} {h.consumer}"][h.host].update(placement_resources(h.flavor))
        return {c: {h: dict(sorted(r.items())) for h, r in hosts.items()} for c, hosts in out.items()}


ENDING_OUTCOME = {"confirm": ("confirm", "confirmed"), "auto-confirm": ("confirm", "confirmed"),
                  "revert": ("revert", "reverted")}


def phase(scenario, placed: dict, moved: dict, name: str, stepping: str | None = None) -> Phase:
    """The ledger of phase ``name``.

    ``placed``: server -> host it booted on; ``moved``: server -> host its
    move went to (both as Nova chose them; ``moved`` is needed from
    VERIFY_RESIZE, or mid-move, on). ``stepping``: inside the endings, the
    server whose ending runs now (the moves end in order: the ones before it
    have ended, the ones after it have not).
    """
    flavors = scenario.flavors
    booted = {s.server: flavors[s.flavor] for s in scenario.boots}
    new = {s.server: flavors[s.flavor] for s in scenario.moves}
    anything = {s: (None, None) for s in booted}  # mid-operation: anything but ERROR

    def settled(server, outcome):
        if server not in new or outcome is None:
            return Holding(placed[server], server, "instance", booted[server])
        if outcome == "revert":
            return Holding(placed[server], server, "instance", booted[server], topology="old")
        return Holding(moved[server], server, "instance", new[server], topology="new")

    def verify_of(server):
        if server not in new:
            return (settled(server, None),)
        return (Holding(placed[server], server, "migration", booted[server], running=False,
                        topology="old"),
                Holding(moved[server], server, "instance", new[server], topology="new"))

    def verify():
        return tuple(h for server in booted for h in verify_of(server))

    def status(moved_status, migration):
        return {s: ((moved_status, migration) if s in new else ("ACTIVE", None)) for s in booted}

    subject = scenario.subject.server
    order = [m.server for m in scenario.moves]

    def mixed(name, stepping, before, at, after=None):
        """Servers by their move's place in the order: before ``stepping``, it, after it."""
        def holds(server):
            if server == stepping:
                return at(server)
            if server in order and order.index(server) > order.index(stepping):
                return (after or at)(server)
            return before(server)
        return Phase(name, tuple(h for server in booted for h in holds(server)), anything)

    if name == "after-boot":
        return Phase(name, tuple(settled(s, None) for s in booted), status("ACTIVE", None))
    if name == "verify-resize":
        return Phase(name, verify(), status("VERIFY_RESIZE", "finished"))
    if name == "in-resize":  # between the source's resize_instance and the dest's finish_resize
        return Phase(name, verify(), anything)
    if name == "in-prep":  # the destination's claim: it holds nothing yet, or the new flavor
        return Phase(name, None, anything, (  # the subject moves last: the others are moved
            mixed("after-boot", subject, verify_of, lambda s: (settled(s, None),)),
            Phase("verify-resize", verify(), anything)))
    if name.startswith("in-"):  # inside the ending: each host before or after its step
        ending = name[len("in-"):]
        outcome = ENDING_OUTCOME[ending][0]
        stepping = stepping or subject
        ended = lambda s: (settled(s, outcome),)  # noqa: E731
        return Phase(name, None, anything, (
            mixed("verify-resize", stepping, ended, verify_of),
            mixed(f"after-{ending}", stepping, ended, ended, verify_of)))
    if name == "after-delete":
        return Phase(name, (), {s: ("DELETED", None) for s in booted})
    ending = name[len("after-"):]
    outcome, migration = ENDING_OUTCOME[ending]
    return Phase(name, tuple(settled(s, outcome) for s in booted), status("ACTIVE", migration))
