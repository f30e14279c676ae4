"""The PCI check: Nova's PCI tracker, placement's PCI providers and the fake
hosts' hostdevs against the ledger, exactly, as the CPU checks do pins and pages.

The ledger says how many devices of each kind (``"VF 8086:1515"``) each host
holds for each server (:meth:`harness.oracles.ledger.Phase.pci_held`); which
device of equals is Nova's choice, read from its tracker, and every other view
must then agree with the tracker device by device:

* tracker: the held (claimed or allocated) devices per server; every other
  device ``available``, or ``unavailable`` / ``unclaimable`` exactly when its
  PF or one of its VFs is allocated / claimed; its pools (free devices per
  vendor:product and cell) count exactly the available records; a device
  a flavor binds to its guest's cells (``hw:pci_numa_affinity_policy`` or the
  alias's ``numa_policy`` required or legacy, the default) lies in a cell of
  the guest's NUMA topology there;
* placement (a host reporting PCI there): each consumer's PCI allocations
  on the host's providers, the ledger's; each provider's inventory, the
  devices the tracker has under it, and its usage (domains settled) the
  devices the tracker holds under it;
* truth: running domains hold the ledger's running devices; none the tracker
  leaves free (or gives another server); with the domains settled, the
  defined domains' hostdevs are the tracker's held devices, address by address.

A scenario without PCI has no ``snapshot["pci"]``: no finding.
"""
from __future__ import annotations

import collections

from harness.oracles.checks import _against_phase, _cmp, check
from harness.oracles.ledger import pci_bound, pci_resource_class

HELD = ("claimed", "allocated")
#: the status a device that is not held takes when a related one (its PF, its VFs) is
RELATED = {"allocated": "unavailable", "claimed": "unclaimable"}


@check("pci")
def pci_matches_ledger(ctx) -> list:
    pci = ctx.snap.get("pci")
    if pci is None:
        return []
    out = []
    for host, view in sorted(pci["tracker"].items()):
        out += _statuses(host, view)
        out += _pools(host, view)
        out += _against_phase(ctx, lambda phase: _held(ctx, pci, phase, host, view))
        if pci["in_placement"].get(host):
            out += _providers(pci, host, view, ctx.exact_cells)
        out += _truth(ctx, pci, host, view)
    out += _against_phase(ctx, lambda phase: _placement(pci, phase))
    return out


def held_by(view: dict) -> dict:
    """server -> device label -> count of the devices the tracker holds for it."""
    out: dict = collections.defaultdict(collections.Counter)
    for dev in view["devices"].values():
        if dev["status"] in HELD:
            out[dev["server"]][f"{dev['kind']} {dev['device']}"] += 1
    return {s: dict(sorted(c.items())) for s, c in sorted(out.items(), key=lambda kv: str(kv[0]))}


def _held(ctx, pci, phase, host, view):
    out = []
    _cmp(out, "pci", f"{host} PCI devices held per server (tracker)",
         phase.pci_held(host, pci["aliases"]), held_by(view))
    out += _cells(ctx, pci, phase, host, view)
    return phase.name, out


def _statuses(host, view) -> list:
    """Every device not held: available, or blocked exactly by a held PF or VF."""
    devices = view["devices"]
    related = collections.defaultdict(list)  # address -> its PF and VFs
    for addr, dev in devices.items():
        if dev["parent"] in devices:
            related[addr].append(dev["parent"])
            related[dev["parent"]].append(addr)
    out = []
    for addr, dev in sorted(devices.items()):
        if dev["status"] in HELD:
            _cmp(out, "pci", f"{host} PCI {addr} held by a server", True, dev["server"] is not None)
            continue
        blockers = {devices[r]["status"] for r in related[addr]} & set(HELD)
        want = ("unavailable" if "allocated" in blockers else
                "unclaimable" if "claimed" in blockers else "available")
        _cmp(out, "pci", f"{host} PCI {addr} status (its PF/VFs held: "
             f"{', '.join(sorted(blockers)) or 'none'})", (want, None),
             (dev["status"], dev["server"]))
    return out


def _pools(host, view) -> list:
    """The tracker's pools (what the scheduler reads) count the available records."""
    free = collections.Counter(f"{d['device']} cell {d['cell']}" for d in view["devices"].values()
                               if d["status"] == "available")
    out = []
    _cmp(out, "pci", f"{host} PCI pools (free devices per vendor:product and cell)",
         dict(sorted(free.items())), {k: n for k, n in view["pools"].items() if n})
    return out


def _cells(ctx, pci, phase, host, view) -> list:
    """A device of an alias whose policy binds it lies in the guest's cells on ``host``."""
    guests: dict = collections.defaultdict(set)  # server -> its guests' cells on host
    bound: dict = collections.defaultdict(set)   # server -> labels its policy binds
    for h in phase.holdings:
        cells = _guest_cells(ctx, h) if h.host == host and h.flavor.numa else None
        if cells is not None:  # a same-host move: the old and new topologies together
            guests[h.server] |= cells
            bound[h.server] |= pci_bound(h.flavor, pci["aliases"])
    out = []
    for server, strict in sorted(bound.items()):
        if not strict:
            continue
        wrong = sorted(addr for addr, d in view["devices"].items()
                       if d["status"] in HELD and d["server"] == server
                       and f"{d['kind']} {d['device']}" in strict
                       and d["cell"] is not None and d["cell"] not in guests[server])
        _cmp(out, "pci", f"{host} {server} PCI devices outside its guest cells "
             f"{sorted(guests[server])} (bound by its numa policy: {', '.join(sorted(strict))})",
             [], wrong)
    return out


def _guest_cells(ctx, holding) -> set | None:
    """The host cells of the NUMA topology the holding stands for (as the rt check reads it)."""
    numa = ctx.snap["numa"].get(holding.server)
    if numa is None:
        return None
    cells = numa["current"]
    if holding.topology != "current":
        seen_last = ctx.chosen.get(holding.server, {}).get(holding.topology)
        cells = next(c for c in (numa[holding.topology], seen_last, cells) if c is not None)
    return {c["cell"] for c in cells}


def _provider_of(host: str, addr: str, dev: dict) -> str:
    """Nova's provider of a device: its PF's for a VF, its own otherwise."""
    return f"{host}_{(dev['parent'] if dev['kind'] == 'VF' else addr).upper()}"


def _providers(pci, host, view, settled: bool) -> list:
    """Each PCI provider of ``host``: inventory and usage are the tracker's devices under it
    (usage once the step is ``settled``: the scheduler allocates before the claim)."""
    tracked = collections.defaultdict(collections.Counter)
    used = collections.defaultdict(collections.Counter)
    for addr, dev in view["devices"].items():
        if dev["status"] in ("removed", "deleted"):
            continue
        rp, rc = _provider_of(host, addr, dev), pci_resource_class(f"x {dev['device']}")
        tracked[rp][rc] += 1
        if dev["status"] in HELD:
            used[rp][rc] += 1
    seen = {name: p for name, p in pci["placement"]["providers"].items()
            if name.startswith(f"{host}_")}
    out = []
    for rp in sorted(set(seen) | set(tracked)):
        want_inv = {rc: n for rc, n in sorted(tracked[rp].items())}
        got = seen.get(rp, {"inventory": {}, "usages": {}})
        _cmp(out, "pci", f"{rp} PCI provider inventory (vs tracker)", want_inv, got["inventory"])
        if settled:
            _cmp(out, "pci", f"{rp} PCI provider usages (vs tracker)",
                 dict(sorted(used[rp].items())), got["usages"])
    return out


def _placement(pci, phase):
    """Each consumer's PCI allocations, summed per host over its PCI providers."""
    seen: dict = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    hosts = sorted(pci["tracker"], key=len, reverse=True)  # "host-a" before a prefix of it
    for consumer, per_rp in pci["placement"]["allocations"].items():
        for rp, resources in per_rp.items():
            host = next((h for h in hosts if rp.startswith(f"{h}_")), rp)
            seen[consumer][host].update(resources)
    seen_plain = {c: {h: dict(sorted(r.items())) for h, r in sorted(v.items())}
                  for c, v in sorted(seen.items())}
    want = phase.pci_allocations(pci["aliases"], pci["in_placement"])
    out = []
    for consumer in sorted(set(want) | set(seen_plain)):
        _cmp(out, "pci", f"PCI allocations of {consumer} (placement)", want.get(consumer, {}),
             seen_plain.get(consumer, {}))
    return phase.name, out


def _truth(ctx, pci, host, view) -> list:
    """The fake host's hostdevs: the ledger's running devices, all held by the tracker."""
    truth = pci["truth"][host]
    tracker = {addr: d["server"] for addr, d in view["devices"].items() if d["status"] in HELD}
    out = []
    if ctx.exact_cells and ctx.phase.holdings is not None:
        running = collections.defaultdict(collections.Counter)
        for addr, server in truth["running"].items():
            dev = view["devices"].get(addr)
            label = f"{dev['kind']} {dev['device']}" if dev else f"untracked {addr}"
            running[server][label] += 1
        _cmp(out, "pci", f"{host} PCI devices held by running domains",
             ctx.phase.pci_held(host, pci["aliases"], running_only=True),
             {s: dict(sorted(c.items())) for s, c in sorted(running.items())})
        if not ctx.phase.shadowed(host):
            _cmp(out, "pci", f"{host} PCI devices of defined domains (vs tracker)",
                 dict(sorted(truth["defined"].items())), dict(sorted(tracker.items())))
    astray = {addr: server for addr, server in sorted(truth["running"].items())
              if tracker.get(addr) != server}
    _cmp(out, "pci", f"{host} PCI devices held on the host but not for that server in the "
         "tracker", {}, astray)
    return out
