"""Undo a root cause's effect on the PCI views (for :mod:`harness.oracles.causes` to call).

A cause whose effect is that a host's tracker still ``counts`` a server's
flavor (e.g. deleted-after-move-dest-untracked) keeps that flavor's PCI
devices held there too. Undoing it on a snapshot frees exactly the devices
the flavor asks for that the tracker holds for the server (or, ``sign`` +1,
can only say nothing: which devices a tracker lost is not knowable), sets
their PF / VFs back to available where nothing else holds them, and gives
the pools the devices back -- so the PCI check and the convergence diff see
what the tracker would show without the effect.
"""
from __future__ import annotations

import collections

from harness.oracles.ledger import pci_demand

HELD = ("claimed", "allocated")
#: per snapshot being undone (the causes undo a cause's effects in order on a deep copy
#: of the checkpoint's snapshot and, for those the periodic keeps, of the periodic's --
#: interleaved): what an effect freed, what a lacks effect found held already, and the
#: pools' first values, for the later effects on the same copy. A few copies at a time,
#: each kept by reference so its id is not reused while it is known.
_UNDOING: "collections.OrderedDict" = collections.OrderedDict()


def _undoing(pci: dict, what: str) -> dict:
    entry = _UNDOING.get(id(pci))
    if entry is None or entry[0] is not pci:
        entry = _UNDOING[id(pci)] = (pci, {"freed": {}, "credit": {}, "pools": {}})
        while len(_UNDOING) > 8:
            _UNDOING.popitem(last=False)
    return entry[1][what]


def _freed(pci: dict) -> dict:
    return _undoing(pci, "freed")


def _shift_pool(pci: dict, host: str, pools: dict, dev: dict, n: int) -> None:
    """A device back in (``n`` +1) or out of its pool. A pool this undo brings back to
    none where the view had no such pool goes again (Nova drops some empty pools --
    a PF whose VFs block it -- and keeps others: a PF allocated itself)."""
    key = f"{dev['device']} cell {dev['cell']}"
    before = _undoing(pci, "pools").setdefault((host, key), pools.get(key))
    pools[key] = pools.get(key, 0) + n
    if not pools[key] and before is None:
        del pools[key]


def free_held(snap: dict, host: str, server: str, flavor) -> bool:
    """Free ``flavor``'s devices held for ``server`` on ``host`` in ``snap["pci"]``
    (no PCI view: nothing to do). False if the tracker does not hold them all."""
    pci = snap.get("pci")
    if pci is None or host not in pci["tracker"]:
        return True
    view = pci["tracker"][host]
    devices, pools = view["devices"], view["pools"]
    ok = True
    for label, count in pci_demand(flavor, pci["aliases"]).items():
        mine = sorted(a for a, d in devices.items() if d["status"] in HELD
                      and d["server"] == server and f"{d['kind']} {d['device']}" == label)
        ok = ok and len(mine) >= count
        # an earlier lacks effect of this undo that found these held already stands for
        # them: (lacks new, counts old) is the tracker holding one device, the new's
        credit = _undoing(pci, "credit")
        spent = min(credit.get((host, server, label), 0), count)
        credit[(host, server, label)] = credit.get((host, server, label), 0) - spent
        for addr in mine[:count - spent]:
            devices[addr].update(status="available", server=None)
            _shift_pool(pci, host, pools, devices[addr], +1)
            _freed(pci).setdefault((host, server), []).append(addr)
    for addr, dev in devices.items():  # a PF / VF blocked only by what was freed
        if dev["status"] in ("unavailable", "unclaimable") and not _blocked(devices, addr):
            dev["status"] = "available"
            _shift_pool(pci, host, pools, dev, +1)
    view["pools"] = dict(sorted(pools.items()))
    return ok


def _blocked(devices: dict, addr: str) -> bool:
    dev = devices[addr]
    related = [a for a, d in devices.items() if d["parent"] == addr]
    if dev["parent"] in devices:
        related.append(dev["parent"])
    return any(devices[r]["status"] in HELD for r in related)


def hold_domains(snap: dict, host: str, server: str, flavor) -> bool:
    """The other way (an effect with ``sign`` -1: the tracker lacks ``flavor`` for
    ``server`` on ``host``): hold again the devices the host's domains of ``server``
    hold (running or defined) that the tracker leaves free -- then those an earlier
    effect freed for it there -- up to what the flavor asks for; block their PF / VFs
    and take them from the pools. False if they do not name them all."""
    pci = snap.get("pci")
    if pci is None or host not in pci["tracker"]:
        return True
    view = pci["tracker"][host]
    devices, pools = view["devices"], view["pools"]
    truth = pci["truth"][host]
    named = sorted({a for a, s in {**truth["defined"], **truth["running"]}.items()
                    if s == server and a in devices})
    # then what an earlier effect of the same cause freed there (counts the new flavor,
    # lacks the old: one device, the tracker's, whether or not a domain holds it)
    named += [a for a in _freed(pci).get((host, server), []) if a not in named]
    ok = True
    for label, count in pci_demand(flavor, pci["aliases"]).items():
        have = sum(1 for d in devices.values() if d["status"] in HELD and d["server"] == server
                   and f"{d['kind']} {d['device']}" == label)
        free = [a for a in named if devices[a]["status"] == "available"
                and f"{devices[a]['kind']} {devices[a]['device']}" == label]
        want = count - have
        ok = ok and len(free) >= want
        if want < count:  # held already: a later counts effect of this undo frees none of them
            credit = _undoing(pci, "credit")
            credit[(host, server, label)] = credit.get((host, server, label), 0) + count - max(want, 0)
        for addr in free[:max(want, 0)]:
            devices[addr].update(status="allocated", server=server)
            _shift_pool(pci, host, pools, devices[addr], -1)
    for addr, dev in devices.items():  # a PF / VF now blocked by what is held again
        if dev["status"] == "available" and _blocked(devices, addr):
            dev["status"] = "unavailable"
            _shift_pool(pci, host, pools, dev, -1)
    view["pools"] = dict(sorted(pools.items()))
    return ok


def shift_allocation(snap: dict, consumer: str, host: str, sign: int, flavor) -> None:
    """Add (``sign`` +1) or take ``flavor``'s PCI resources to ``consumer``'s allocation
    on ``host``'s PCI providers and to their usages (``_undo_allocation``'s PCI half):
    taken from the providers that hold them, added to the first that can. A consumer
    the view did not read (a deleted server's migration): the providers' usages only,
    as ``_undo_allocation`` does, taken from those that have some."""
    from harness.oracles.ledger import pci_resource_class
    pci = snap.get("pci")
    if pci is None or not pci["in_placement"].get(host):
        return
    providers = pci["placement"]["providers"]
    allocations = pci["placement"]["allocations"]
    # read: the placement view has the consumer (its PCI half lists only one holding some)
    read = "placement" not in snap or consumer in snap["placement"]["allocations"]
    mine = allocations.setdefault(consumer, {}) if read else {}
    for label, count in pci_demand(flavor, pci["aliases"]).items():
        rc = pci_resource_class(label)
        names = sorted(n for n, p in providers.items()
                       if n.startswith(f"{host}_") and rc in p["inventory"])
        def holding(name: str) -> int:  # what can be taken there
            return (mine.get(name, {}) if read else providers[name]["usages"]).get(rc, 0)
        if sign < 0:
            names = [n for n in names if holding(n)]
        for name in names:
            if not count:
                break
            n = count if sign > 0 else min(count, holding(name))
            for amounts in ((mine.setdefault(name, {}),) if read else ()) + (
                    providers[name]["usages"],):
                amounts[rc] = amounts.get(rc, 0) + sign * n
                if not amounts[rc]:
                    del amounts[rc]
            if read and not mine[name]:
                del mine[name]
            count -= n
    if read and not mine:
        del allocations[consumer]


def shift_domains(snap: dict, host: str, server: str, flavor, kinds: tuple, sign: int) -> bool:
    """A cause's ``domain`` effect's PCI half: take (``sign`` -1) the devices ``server``'s
    domains on ``host`` hold from the fake host's ``kinds`` ("defined", "running"), up to
    what ``flavor`` asks for; or (+1: the host lacks the domain) give them the devices the
    tracker holds for ``server`` there. False if the devices were not all there to move."""
    pci = snap.get("pci")
    if pci is None or host not in pci["truth"]:
        return True
    devices = pci["tracker"][host]["devices"]
    truth = pci["truth"][host]

    def label(addr: str) -> str | None:
        dev = devices.get(addr)
        return f"{dev['kind']} {dev['device']}" if dev else None
    ok = True
    for kind in kinds:
        held = truth[kind]
        for want, count in pci_demand(flavor, pci["aliases"]).items():
            if sign < 0:
                addrs = sorted(a for a, s in held.items() if s == server and label(a) == want)
            else:
                have = sum(1 for a, s in held.items() if s == server and label(a) == want)
                count -= have
                addrs = sorted(a for a, d in devices.items() if d["status"] in HELD
                               and d["server"] == server and label(a) == want
                               and a not in held)
            ok = ok and len(addrs) >= count
            for addr in addrs[:max(count, 0)]:
                if sign < 0:
                    del held[addr]
                else:
                    held[addr] = server
        truth[kind] = dict(sorted(held.items()))
    return ok
