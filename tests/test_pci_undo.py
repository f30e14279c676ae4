"""Undoing a cause's ``counts`` effect on the PCI views frees exactly the flavor's devices."""
import copy

from harness.oracles import pci_undo
from harness.oracles.ledger import Phase
from tests.test_pci_checks import LARGE, SMALL, clean, found

DELETED = Phase("after-delete", (), {})


def leaked() -> dict:
    """After the deletes, host-b's tracker still holds vm1's VF (the untracked
    destination's shape: its PF blocked, its pools one short); the rest is free."""
    snap = clean()
    pci = snap["pci"]
    pci["tracker"]["host-a"]["devices"]["0000:82:00.2"].update(status="available", server=None)
    pci["tracker"]["host-a"]["pools"] = {"8086:1515 cell 1": 2}
    pci["tracker"]["host-b"]["devices"]["0000:81:00.0"] = {
        "status": "unavailable", "server": None, "kind": "PF", "device": "8086:1528", "cell": 0,
        "parent": None}
    pci["placement"] = {"providers": {}, "allocations": {}}
    pci["in_placement"] = {"host-a": False, "host-b": False}
    pci["truth"] = {"host-a": {"running": {}, "defined": {}},
                    "host-b": {"running": {}, "defined": {}}}
    snap["numa"] = {}
    return snap


def test_the_leak_is_found_and_undoing_it_leaves_nothing():
    snap = leaked()
    assert any("host-b PCI devices held per server (tracker): expected {}, seen {'vm1'" in ln
               for ln in found(snap, DELETED))
    assert pci_undo.free_held(snap, "host-b", "vm1", LARGE)
    assert found(snap, DELETED) == []
    host_b = snap["pci"]["tracker"]["host-b"]
    assert host_b["pools"] == {"8086:1515 cell 0": 3, "8086:1528 cell 0": 1}
    assert {d["status"] for d in host_b["devices"].values()} == {"available"}


def test_undo_frees_no_more_than_the_flavor_asks_and_says_when_it_could_not():
    snap = leaked()
    before = copy.deepcopy(snap)
    assert not pci_undo.free_held(snap, "host-a", "vm1", SMALL)  # host-a holds nothing for vm1
    assert snap == before
    assert pci_undo.free_held({"numa": {}}, "host-b", "vm1", LARGE)  # no PCI view: nothing
