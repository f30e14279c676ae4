"""Declared PCI devices and the cloud's PCI config (pure data, no Nova).

The fake host's claims and an in-process boot: tests/inprocess/test_pci_host.py.
"""
import json

import pytest

from fake_driver import domain_xml, pci, topology
from harness import scenario
from harness.errors import InvalidScenario, InvalidTopology, UnknownChoice

PF = {"type": "PF", "numa_node": 0, "vendor_id": "8086", "product_id": "1528",
      "vfs": 2, "vf_product_id": "1515"}
NIC = {"type": "PCI", "numa_node": 1, "vendor_id": "8086", "product_id": "1533"}
HOST = {"name": "h", "cells": 2, "cores": 2, "memory_mb": 2048, "pci": [PF, NIC]}


def test_devices_get_stable_addresses_per_cell():
    h = topology.host_from_dict(HOST)
    assert [(d.address, d.kind, d.product_id, d.numa_node, d.parent) for d in h.pci] == [
        ("0000:81:00.0", "PF", "1528", 0, None),
        ("0000:81:00.1", "VF", "1515", 0, "0000:81:00.0"),
        ("0000:81:00.2", "VF", "1515", 0, "0000:81:00.0"),
        ("0000:82:00.0", "PCI", "1533", 1, None)]
    assert topology.host_from_dict(HOST).pci == h.pci  # deterministic
    assert h.pci[1].name == "pci_0000_81_00_1"


def test_count_and_explicit_addresses():
    h = topology.host_from_dict({**HOST, "pci": [
        {**PF, "count": 2}, {**NIC, "numa_node": 0, "address": "81:00.0"}]})
    pfs = [d.address for d in h.pci if d.kind == "PF"]
    assert pfs == ["0000:81:01.0", "0000:81:02.0"]  # the explicit one keeps slot 0
    assert [d.address for d in h.pci if d.kind == "PCI"] == ["0000:81:00.0"]
    assert topology.host_from_dict({**HOST, "pci": []}).pci == ()
    assert topology.host_from_dict({k: v for k, v in HOST.items() if k != "pci"}).pci == ()


@pytest.mark.parametrize("entry, message", [
    ({**NIC, "numa_node": 2}, "'numa_node' must be a cell of the host (0-1), got 2"),
    ({**NIC, "numa_node": None}, "'numa_node' must be a cell of the host"),
    ({"type": "VF", "numa_node": 0, "vendor_id": "8086", "product_id": "1515"},
     "a VF has no declaration of its own"),
    ({**NIC, "vfs": 2, "vf_product_id": "1515"}, "a plain PCI device has no VFs"),
    ({**PF, "vf_product_id": "15"},
     "'vf_product_id' must be 4 hex digits"),
    ({k: v for k, v in PF.items() if k != "vf_product_id"}, "'vfs' and 'vf_product_id' go together"),
    ({**NIC, "vendor_id": "intel"}, "'vendor_id' must be 4 hex digits such as '8086', got 'intel'"),
    ({**NIC, "product_id": 1533}, "'product_id' must be 4 hex digits"),
    ({**PF, "vfs": 8}, "'vfs' must be an integer 0-7"),
    ({**NIC, "type": "GPU"}, "'type' must be 'PF' or 'PCI'"),
    ({**NIC, "address": "81:00.1"}, "must be function 0 of a slot"),
    ({**NIC, "address": "0001:81:00.0"}, "on PCI domain 0000"),
    ({**NIC, "colour": "red"}, "unknown key(s) ['colour']"),
])
def test_malformed_device_is_one_clear_line(entry, message):
    with pytest.raises(InvalidTopology) as exc:
        topology.host_from_dict({**HOST, "pci": [PF, entry]}, "hosts[0]")
    assert message in str(exc.value)
    assert "hosts[0] 'h': pci[1]" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_duplicate_address_is_refused():
    dup = [{**NIC, "address": "83:01.0"}, {**NIC, "numa_node": 0, "address": "0000:83:01.0"}]
    with pytest.raises(InvalidTopology, match=r"hosts\[0\] 'h': pci\[1\]: duplicate address "
                                              r"0000:83:01.0 \(also hosts\[0\] 'h': pci\[0\]\)"):
        topology.host_from_dict({**HOST, "pci": dup}, "hosts[0]")
    with pytest.raises(InvalidTopology, match="duplicate address 0000:83:01.0"):
        topology.host_from_dict({**HOST, "pci": [{**NIC, "address": "83:00.0", "count": 2}, dup[0]]})


def test_hostdev_and_vf_interface_are_claimed():
    xml = """<domain><name>g</name><devices>
      <hostdev mode="subsystem" type="pci" managed="yes"><source>
        <address domain="0x0000" bus="0x81" slot="0x00" function="0x0"/></source></hostdev>
      <interface type="hostdev" managed="yes"><source>
        <address type="pci" domain="0x0000" bus="0x82" slot="0x01" function="0x3"/></source></interface>
      <interface type="bridge"><source bridge="br0"/></interface>
    </devices></domain>"""
    claim = domain_xml.parse_claim(xml, frozenset(), lambda cpu: 0)
    assert claim.pci == {"0000:81:00.0", "0000:82:01.3"}
    assert domain_xml.parse_claim("<domain><name>g</name></domain>", frozenset(), int).pci == frozenset()


# -- the cloud's [pci] config ----------------------------------------------------
def scenario_dict(cloud_pci=None, specs=None, pci_devices=(PF, NIC)):
    cloud = {"cpu_dedicated_set": "0-3"}
    if cloud_pci is not None:
        cloud["pci"] = cloud_pci
    hosts = [{"name": n, "cells": 2, "cores": 2, "memory_mb": 2048, "pci": list(pci_devices)}
             for n in ("host-a", "host-b")]
    flavor = {"vcpus": 1, "memory_mb": 512,
              "extra_specs": {"hw:cpu_policy": "dedicated", **(specs or {})}}
    return {"cloud": cloud, "hosts": hosts, "flavors": {"f": flavor},
            "steps": [{"op": "boot", "server": "vm1", "flavor": "f"},
                      {"op": "migrate", "server": "vm1"}]}


ALIASES = {"pfs": {"vendor_id": "8086", "product_id": "1528", "device_type": "PF"},
           "vfs": {"vendor_id": "8086", "product_id": "1515", "device_type": "VF",
                   "numa_policy": "required"}}


SPEC = {p: {"vendor_id": "8086", "product_id": p} for p in ("1515", "1528", "1533")}


def test_cloud_pci_config_is_derived_and_declared():
    s = scenario.from_dict(scenario_dict({"alias": ALIASES}, {"pci_passthrough:alias": "vfs:1"}))
    assert [json.loads(x) for x in s.pci.device_spec] == [
        {"vendor_id": "8086", "product_id": p} for p in ("1515", "1528", "1533")]
    assert [json.loads(x) for x in s.pci.alias_options()] == [
        {"vendor_id": "8086", "product_id": "1528", "device_type": "type-PF", "name": "pfs"},
        {"vendor_id": "8086", "product_id": "1515", "device_type": "type-VF",
         "numa_policy": "required", "name": "vfs"}]
    assert s.pci.in_placement is False
    assert scenario.from_dict(scenario_dict()).pci.aliases == {}  # devices, no table
    listed = scenario.from_dict(scenario_dict({"in_placement": True, "device_spec": [
        SPEC["1515"], SPEC["1533"]]})).pci  # the VFs, not their PF: placement takes it
    assert [json.loads(x) for x in listed.device_spec] == [SPEC["1515"], SPEC["1533"]]
    assert listed.in_placement is True and listed.per_host == {}
    own = scenario.from_dict(scenario_dict({"hosts": {"host-b": {
        "report_in_placement": True, "device_spec": [SPEC["1515"]]}}})).pci
    assert own.per_host == {"host-b": {"device_spec": [json.dumps(SPEC["1515"])],
                                       "report_in_placement": True}}
    assert own.in_placement is False and len(own.device_spec) == 3  # the others' default
    assert scenario.from_dict(scenario_dict(pci_devices=())).pci is None  # as before PCI


@pytest.mark.parametrize("cloud_pci, message", [
    ({"alias": {"x": {**ALIASES["pfs"], "device_type": "VF"}}},
     "cloud.pci.alias.x: no host declares a VF 8086:1528"),
    ({"alias": {"x": {**ALIASES["pfs"], "device_type": "type-PF"}}}, "'device_type' must be one of"),
    ({"alias": {"x": {**ALIASES["pfs"], "numa_policy": "strict"}}}, "'numa_policy' must be one of"),
    ({"alias": {"x": {**ALIASES["pfs"], "vendor_id": "80860"}}}, "'vendor_id' must be 4 hex digits"),
    ({"in_placement": "yes"}, "cloud.pci: 'in_placement' must be true or false"),
    ({"in_placement": True}, "cloud.pci: with in_placement Nova tracks a PF or its VFs, not both: "
                             "device_spec lists PF 8086:1528 and its VF 8086:1515 (host 'host-a'); "
                             "list device_spec"),
    ({"in_placement": True, "device_spec": [SPEC["1528"], SPEC["1515"]]},
     "device_spec lists PF 8086:1528 and its VF 8086:1515 (host 'host-a')"),
    ({"device_spec": [SPEC["1528"]], "alias": ALIASES},
     "cloud.pci.alias.vfs: device_spec leaves out 8086:1515"),
    ({"device_spec": [{"vendor_id": "8086", "product_id": "0001"}]},
     "cloud.pci.device_spec[0]: no device 8086:0001 is declared there"),
    ({"hosts": {"host-c": {}}}, "cloud.pci: 'hosts' must be a table of [cloud.pci.hosts.NAME] tables, "
                                "NAME one of ['host-a', 'host-b']"),
    ({"hosts": {"host-b": {"in_placement": True}}}, "cloud.pci.hosts.host-b: expected a table of"),
    ({"hosts": {"host-b": {"report_in_placement": 1}}},
     "cloud.pci.hosts.host-b: 'report_in_placement' must be true or false"),
    ({"hosts": {"host-b": {"report_in_placement": True}}},
     "cloud.pci.hosts.host-b: with in_placement Nova tracks a PF or its VFs, not both: device_spec "
     "lists PF 8086:1528 and its VF 8086:1515 (host 'host-b'); list device_spec"),
    ({"hosts": {"host-b": {"device_spec": [{"vendor_id": "8086", "product_id": "0001"}]}}},
     "cloud.pci.hosts.host-b.device_spec[0]: no device 8086:0001 is declared there"),
    ({"device_spec": [{"vendor_id": "8086"}]}, "cloud.pci.device_spec[0]: expected a table of exactly"),
    ({"device_spec": []}, "cloud.pci: 'device_spec' must be a list"),
    ({"report": True}, "cloud.pci: unknown key(s) ['report']"),
])
def test_malformed_cloud_pci_is_one_clear_line(cloud_pci, message):
    with pytest.raises(InvalidScenario) as exc:
        scenario.from_dict(scenario_dict(cloud_pci), "s.toml")
    assert message in str(exc.value) and "s.toml" in str(exc.value)


def test_flavor_alias_must_be_declared():
    with pytest.raises(UnknownChoice, match=r"unknown pci_passthrough:alias in s.toml: flavors.f "
                                            r"'gpu'; valid: pfs, vfs"):
        scenario.from_dict(scenario_dict({"alias": ALIASES}, {"pci_passthrough:alias": "gpu:1"}),
                           "s.toml")
    assert pci.flavor_aliases({"pci_passthrough:alias": "pfs:1, vfs:2"}) == {"pfs": 1, "vfs": 2}


def test_a_live_migratable_alias_tags_its_device_spec_pairs():
    hosts = [topology.host_from_dict(dict(HOST, pci=[PF]))]
    cloud = pci.pci_cloud_from_dict(
        {"alias": {"vf": {"vendor_id": "8086", "product_id": "1515", "device_type": "VF",
                          "live_migratable": True}}}, hosts)
    assert json.loads(cloud.alias_options()[0])["live_migratable"] == "yes"
    specs = [json.loads(s) for s in cloud.device_spec]
    assert [s.get("live_migratable") for s in specs if s["product_id"] == "1515"] == ["yes"]
    assert all("live_migratable" not in s for s in specs if s["product_id"] != "1515")
    with pytest.raises(InvalidTopology, match="'live_migratable' must be true or false"):
        pci.pci_cloud_from_dict({"alias": {"vf": {"vendor_id": "8086", "product_id": "1515",
                                                  "device_type": "VF", "live_migratable": "yes"}}},
                                hosts)
