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


def test_a_tracker_that_lost_a_running_guests_device_gets_it_back():
    snap = clean()  # VERIFY_RESIZE; host-b's tracker lost vm1's VF, its guest runs on it
    host_b = snap["pci"]["tracker"]["host-b"]
    host_b["devices"]["0000:81:00.3"].update(status="available", server=None)
    host_b["pools"] = {"8086:1515 cell 0": 3}
    placement = snap["pci"]["placement"]
    placement["providers"]["host-b_0000:81:00.0"]["usages"] = {}
    assert found(snap)  # the tracker, the hostdevs and placement's usage say so
    assert pci_undo.hold_domains(snap, "host-b", "vm1", LARGE)
    assert host_b["pools"] == {"8086:1515 cell 0": 2}
    placement["providers"]["host-b_0000:81:00.0"]["usages"] = {"CUSTOM_PCI_8086_1515": 1}
    assert found(snap) == []
    assert not pci_undo.hold_domains(snap, "host-b", "vm2", LARGE)  # no domain of vm2 there


def test_a_consumers_pci_allocation_is_shifted_on_the_hosts_providers():
    snap = clean()
    placement = snap["pci"]["placement"]
    pci_undo.shift_allocation(snap, "vm1 migration", "host-a", -1, SMALL)
    assert "vm1 migration" not in placement["allocations"]
    assert placement["providers"]["host-a_0000:82:00.0"]["usages"] == {}
    pci_undo.shift_allocation(snap, "vm1 migration", "host-a", +1, SMALL)
    assert snap == clean()
