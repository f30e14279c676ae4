"""Undo a root cause's effect on the PCI views (for :mod:`harness.oracles.causes`).

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

from harness.oracles.ledger import pci_demand

HELD = ("claimed", "allocated")


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
        for addr in mine[:count]:
            devices[addr].update(status="available", server=None)
            _give_back(pools, devices[addr])
    for addr, dev in devices.items():  # a PF / VF blocked only by what was freed
        if dev["status"] in ("unavailable", "unclaimable") and not _blocked(devices, addr):
            dev["status"] = "available"
            _give_back(pools, dev)
    view["pools"] = dict(sorted(pools.items()))
    return ok


def _blocked(devices: dict, addr: str) -> bool:
    dev = devices[addr]
    related = [a for a, d in devices.items() if d["parent"] == addr]
    if dev["parent"] in devices:
        related.append(dev["parent"])
    return any(devices[r]["status"] in HELD for r in related)


def _give_back(pools: dict, dev: dict) -> None:
    key = f"{dev['device']} cell {dev['cell']}"
    pools[key] = pools.get(key, 0) + 1
