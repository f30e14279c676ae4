"""The PCI check fires on each corrupted view and is silent on a clean one (no Nova).

The clean snapshot is what Nova 34 showed at pci-vf-resize-placement's
VERIFY_RESIZE (measured): vm1's old VF on host-a held for the migration,
its new VF on host-b for the instance, each PF blocked by its VF.
"""
import copy

import pytest

from harness import scenario
from harness.oracles import checks, pci_checks
from harness.oracles.ledger import Holding, Phase

SCEN = scenario.load("pci-vf-resize-placement")
SMALL, LARGE = SCEN.flavors["small"], SCEN.flavors["large"]
VERIFY = Phase("verify-resize", (
    Holding("host-a", "vm1", "migration", SMALL, running=False, topology="old"),
    Holding("host-b", "vm1", "instance", LARGE, topology="new")), {})


def dev(status, server, kind, device, cell, parent=None):
    return {"status": status, "server": server, "kind": kind, "device": device, "cell": cell,
            "parent": parent}


def clean() -> dict:
    pf_a, pf_b = "0000:82:00.0", "0000:81:00.0"
    return {
        "numa": {"vm1": {"current": [{"cell": 0}], "old": [{"cell": 1}], "new": [{"cell": 0}]}},
        "pci": {
            "aliases": {"vf": {"vendor_id": "8086", "product_id": "1515", "device_type": "type-VF"}},
            "in_placement": {"host-a": True, "host-b": True},
            "tracker": {
                "host-a": {"devices": {
                    "0000:82:00.1": dev("available", None, "VF", "8086:1515", 1, pf_a),
                    "0000:82:00.2": dev("allocated", "vm1", "VF", "8086:1515", 1, pf_a)},
                    "pools": {"8086:1515 cell 1": 1}},
                "host-b": {"devices": {
                    "0000:81:00.1": dev("available", None, "VF", "8086:1515", 0, pf_b),
                    "0000:81:00.2": dev("available", None, "VF", "8086:1515", 0, pf_b),
                    "0000:81:00.3": dev("allocated", "vm1", "VF", "8086:1515", 0, pf_b)},
                    "pools": {"8086:1515 cell 0": 2}}},
            "placement": {
                "providers": {
                    "host-a_0000:82:00.0": {"inventory": {"CUSTOM_PCI_8086_1515": 2},
                                            "usages": {"CUSTOM_PCI_8086_1515": 1}},
                    "host-b_0000:81:00.0": {"inventory": {"CUSTOM_PCI_8086_1515": 3},
                                            "usages": {"CUSTOM_PCI_8086_1515": 1}}},
                "allocations": {
                    "vm1 instance": {"host-b_0000:81:00.0": {"CUSTOM_PCI_8086_1515": 1}},
                    "vm1 migration": {"host-a_0000:82:00.0": {"CUSTOM_PCI_8086_1515": 1}}}},
            "truth": {"host-a": {"running": {}, "defined": {"0000:82:00.2": "vm1"}},
                      "host-b": {"running": {"0000:81:00.3": "vm1"},
                                 "defined": {"0000:81:00.3": "vm1"}}}}}


def found(snap, phase=VERIFY, exact=True) -> list:
    ctx = checks.CheckContext(None, phase, snap, exact, 512, "", {})
    return [f.line() for f in pci_checks.pci_matches_ledger(ctx)]


def test_the_clean_verify_resize_has_no_finding():
    assert found(clean()) == []


def test_a_scenario_without_pci_has_no_pci_finding():
    assert found({"numa": {}}) == []
    assert "pci" in checks.LEDGER


def _with(change):
    snap = clean()
    change(snap["pci"])
    return found(snap)


def _dev(pci, host, addr):
    return pci["tracker"][host]["devices"][addr]


CORRUPTIONS = {
    "a device freed under the ledger": (
        lambda p: _dev(p, "host-a", "0000:82:00.2").update(status="available", server=None),
        "[pci] host-a PCI devices held per server (tracker): expected {'vm1': {'VF 8086:1515': 1}}, "
        "seen {}"),
    "a device held for the wrong server": (
        lambda p: _dev(p, "host-b", "0000:81:00.3").update(server="vm9"),
        "seen {'vm9': {'VF 8086:1515': 1}}"),
    "a VF left available beside its PF given away": (
        lambda p: p["tracker"]["host-b"]["devices"].update(
            {"0000:81:00.0": dev("available", None, "PF", "8086:1528", 0)}),
        "[pci] host-b PCI 0000:81:00.0 status (its PF/VFs held: allocated): expected "
        "('unavailable', None), seen ('available', None)"),
    "pools that count a held device free": (
        lambda p: p["tracker"]["host-b"]["pools"].update({"8086:1515 cell 0": 3}),
        "[pci] host-b PCI pools (free devices per vendor:product and cell): expected "
        "{'8086:1515 cell 0': 2}, seen {'8086:1515 cell 0': 3}"),
    "a legacy-bound VF on the guest's other cell": (
        lambda p: _dev(p, "host-b", "0000:81:00.3").update(cell=1),
        "[pci] host-b vm1 PCI devices outside its guest cells [0] (bound by its numa policy: "
        "VF 8086:1515): expected [], seen ['0000:81:00.3']"),
    "the migration's PCI allocation dropped": (
        lambda p: p["placement"]["allocations"].pop("vm1 migration"),
        "[pci] PCI allocations of vm1 migration (placement): expected "
        "{'host-a': {'CUSTOM_PCI_8086_1515': 1}}, seen {}"),
    "a provider's usage beside the tracker's": (
        lambda p: p["placement"]["providers"]["host-a_0000:82:00.0"].update(usages={}),
        "[pci] host-a_0000:82:00.0 PCI provider usages (vs tracker): expected "
        "{'CUSTOM_PCI_8086_1515': 1}, seen {}"),
    "a provider's inventory beside the tracker's": (
        lambda p: p["placement"]["providers"]["host-b_0000:81:00.0"].update(
            inventory={"CUSTOM_PCI_8086_1515": 4}),
        "[pci] host-b_0000:81:00.0 PCI provider inventory (vs tracker): expected "
        "{'CUSTOM_PCI_8086_1515': 3}, seen {'CUSTOM_PCI_8086_1515': 4}"),
    "a running guest holding a device the tracker leaves free": (
        lambda p: p["truth"]["host-b"]["running"].update({"0000:81:00.1": "vm1"}),
        "[pci] host-b PCI devices held on the host but not for that server in the tracker: "
        "expected {}, seen {'0000:81:00.1': 'vm1'}"),
    "a defined domain without its device in the tracker": (
        lambda p: p["truth"]["host-a"].update(defined={}),
        "[pci] host-a PCI devices of defined domains (vs tracker): expected {}, "
        "seen {'0000:82:00.2': 'vm1'}"),
    "a running guest without its device": (
        lambda p: p["truth"]["host-b"].update(running={}),
        "[pci] host-b PCI devices held by running domains: expected "
        "{'vm1': {'VF 8086:1515': 1}}, seen {}"),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_each_corruption_is_found_exactly(name):
    change, line = CORRUPTIONS[name]
    lines = _with(change)
    assert any(line in ln for ln in lines), lines


def test_inside_a_step_either_side_holds():
    after = Phase("after-boot", (Holding("host-a", "vm1", "instance", SMALL),), {})
    step = Phase("in-prep", None, {}, (after, VERIFY))
    assert found(clean(), step, exact=False) == []
    snap = clean()
    _dev(snap["pci"], "host-a", "0000:82:00.2").update(status="available", server=None)
    lines = found(snap, step, exact=False)
    assert any("(nearest: " in ln and "host-a PCI devices held per server" in ln for ln in lines)


def test_a_preferred_policy_lets_the_device_lie_apart():
    flavor = scenario.Flavor(LARGE.name, LARGE.vcpus, LARGE.memory_mb, LARGE.disk_gb,
                             {**LARGE.extra_specs, "hw:pci_numa_affinity_policy": "preferred"})
    phase = Phase("verify-resize", (VERIFY.holdings[0],
                                    Holding("host-b", "vm1", "instance", flavor, topology="new")), {})
    snap = clean()
    _dev(snap["pci"], "host-b", "0000:81:00.3").update(cell=1)
    snap["pci"]["tracker"]["host-b"]["pools"] = {"8086:1515 cell 0": 2}
    assert found(snap, phase) == []


def test_every_pci_scenario_asks_its_hosts_for_devices_through_its_aliases():
    from harness.oracles.ledger import pci_demand
    names = [n for n in scenario.available() if n.startswith("pci-")]
    assert len(names) >= 6
    for name in names:
        scen = scenario.load(name)
        aliases = scen.pci.aliases
        assert all(pci_demand(scen.flavors[b.flavor], aliases) for b in scen.boots), name
    assert scenario.load("pci-unshelve").pci.aliases["vf"]["device_type"] == "type-VF"
    assert scenario.load("pinned-hugepages").pci is None  # a non-PCI scenario: no PCI view
