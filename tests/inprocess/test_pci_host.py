"""The fake host's PCI devices: Nova sees them, running domains really hold them."""
import pytest

from fake_driver import topology

PF = {"type": "PF", "numa_node": 0, "vendor_id": "8086", "product_id": "1528",
      "vfs": 2, "vf_product_id": "1515"}
NIC = {"type": "PCI", "numa_node": 1, "vendor_id": "8086", "product_id": "1533"}
HOST = {"name": "h", "cells": 2, "cores": 2, "memory_mb": 2048, "pci": [PF, NIC]}
PF_ADDR, VF1, VF2, NIC_ADDR = "0000:81:00.0", "0000:81:00.1", "0000:81:00.2", "0000:82:00.0"


def xml(name, *addresses, vf_port=None):
    def source(addr, kind=""):
        dom, bus, rest = addr.split(":")
        slot, function = rest.split(".")
        return (f'<source><address {kind}domain="0x{dom}" bus="0x{bus}" slot="0x{slot}" '
                f'function="0x{function}"/></source>')
    devs = "".join(f'<hostdev mode="subsystem" type="pci" managed="yes">{source(a)}</hostdev>'
                   for a in addresses)
    if vf_port:
        port = source(vf_port, "type='pci' ")
        devs += f'<interface type="hostdev" managed="yes">{port}</interface>'
    return f"""<domain><name>{name}</name><uuid>{name}</uuid><memory>65536</memory>
      <vcpu>1</vcpu><os><type>hvm</type></os><devices>{devs}</devices></domain>"""


@pytest.fixture
def host(nova):
    from fake_driver.host import FakeLibvirtHost
    return FakeLibvirtHost(topology.host_from_dict(HOST), frozenset({0, 1, 2, 3}))


def test_nova_reads_the_declared_devices_with_their_cells(host):
    from nova.virt.libvirt import config as vconfig
    names = sorted(host.listDevices("pci", 0))
    assert names == ["pci_0000_81_00_0", "pci_0000_81_00_1", "pci_0000_81_00_2", "pci_0000_82_00_0"]
    seen = {}
    for name in names:
        dev = vconfig.LibvirtConfigNodeDevice()
        dev.parse_str(host.nodeDeviceLookupByName(name).XMLDesc(0))
        cap = dev.pci_capability
        funcs = {f.type: f.device_addrs for f in cap.fun_capability}
        seen[name] = (cap.product_id, cap.numa_node, funcs)
    assert seen["pci_0000_81_00_0"] == (0x1528, 0, {"virt_functions": [(0, 0x81, 0, 1), (0, 0x81, 0, 2)]})
    assert seen["pci_0000_81_00_2"] == (0x1515, 0, {"phys_function": [(0, 0x81, 0, 0)]})
    assert seen["pci_0000_82_00_0"] == (0x1533, 1, {})


def test_running_domains_hold_their_devices_per_cell(host):
    a = host.defineXML(xml("a", NIC_ADDR, vf_port=VF1))
    assert host.pci_truth()[VF1]["held_by"] is None  # defined is not running
    a.create()
    truth = host.ground_truth()
    assert truth[0]["pci"] == {VF1: "a"} and truth[1]["pci"] == {NIC_ADDR: "a"}
    assert truth[0]["by_domain"]["a"]["pci"] == {VF1} and truth[0]["cpus"] == frozenset()
    assert {addr: d["held_by"] for addr, d in host.pci_truth().items()} == {
        PF_ADDR: None, VF1: "a", VF2: None, NIC_ADDR: "a"}
    assert host.pci_truth()[VF1] == {"kind": "VF", "vendor_id": "8086", "product_id": "1515",
                                     "numa_node": 0, "parent": PF_ADDR, "held_by": "a"}
    host.defineXML(xml("b", VF2)).create()  # the PF's other VF is free
    a.destroy()
    assert host.ground_truth()[1]["pci"] == {} and host.ground_truth()[0]["pci"] == {VF2: "b"}
    assert host.defined_claims()[1]["pci"] == {NIC_ADDR: "a"}  # still defined


@pytest.mark.parametrize("first, second, message", [
    (xml("a", NIC_ADDR), xml("b", NIC_ADDR), f"PCI device {NIC_ADDR} is in use by domain 'a'"),
    (xml("a", vf_port=VF1), xml("b", VF1), f"PCI device {VF1} is in use by domain 'a'"),
    (xml("a", VF2), xml("b", PF_ADDR), f"PCI device {PF_ADDR} is in use \\(its VF {VF2}\\) by domain 'a'"),
    (xml("a", PF_ADDR), xml("b", vf_port=VF1), f"PCI device {VF1} is in use \\(its PF {PF_ADDR}\\) by "
                                               "domain 'a'"),
    (xml("a"), xml("b", "0000:83:00.0"), "PCI device 0000:83:00.0 not found"),
])
def test_a_second_claim_is_a_libvirt_error(host, first, second, message):
    from nova.tests.fixtures import libvirt as fakelibvirt
    host.defineXML(first).create()
    dom = host.defineXML(second)
    with pytest.raises(fakelibvirt.libvirtError, match=f"host h: cannot start domain 'b': {message}"):
        dom.create()
    assert not dom.isActive()
    assert "b" not in {d["held_by"] for d in host.pci_truth().values()}
    host.lookupByUUIDString("a").destroy()
    if "not found" not in message:
        dom.create()  # free again: the same start succeeds


def scenario(in_placement=False):
    from harness import scenario as scenarios
    return scenarios.from_dict(scenario_dict(in_placement), "pci.toml")


def scenario_dict(in_placement=False, pci_hosts=None):
    """host-a: PF (2 VFs) on cell 0, NIC on cell 1; host-b the other way round."""
    pci = {"in_placement": in_placement, "hosts": pci_hosts or {}, "alias": {
        "vfs": {"vendor_id": "8086", "product_id": "1515", "device_type": "VF"},
        "nic": {"vendor_id": "8086", "product_id": "1533", "device_type": "PCI"}}}
    if in_placement:  # the VFs, not their PF
        pci["device_spec"] = [{"vendor_id": "8086", "product_id": p} for p in ("1515", "1533")]
    hosts = [dict(HOST, name="host-a", cores=2),
             dict(HOST, name="host-b", cores=2, pci=[{**PF, "numa_node": 1}, {**NIC, "numa_node": 0}])]
    pinned = {"hw:cpu_policy": "dedicated"}
    return {
        "cloud": {"cpu_dedicated_set": "0-3", "pci": pci},
        "hosts": hosts,
        "flavors": {"vf": {"vcpus": 1, "memory_mb": 256,
                           "extra_specs": {**pinned, "pci_passthrough:alias": "vfs:1"}},
                    "nic": {"vcpus": 1, "memory_mb": 256,
                            "extra_specs": {**pinned, "pci_passthrough:alias": "nic:1"}}},
        "steps": [{"op": "boot", "server": "vm1", "flavor": "vf", "host": "host-a"},
                  {"op": "migrate", "server": "vm1", "host": "host-b"}]}


def pci_usages(cloud) -> dict:
    """Placement's usages of the PCI providers (``host_address``), by provider name."""
    out = {}
    for rp in cloud.env.placement.get("/resource_providers").body["resource_providers"]:
        if "_" in rp["name"]:
            usages = cloud.env.placement.get(f"/resource_providers/{rp['uuid']}/usages").body
            out[rp["name"]] = {k: v for k, v in usages["usages"].items() if v}
    return out


@pytest.mark.parametrize("in_placement", [False, True])
def test_nova_and_the_fake_host_agree_on_what_a_guest_holds(nova, in_placement):
    """A pinned guest with a VF alias and one with a plain device on a two-cell
    host: Nova's PciDevice records, its resource tracker and the fake host name
    the same device, instance and cell (legacy affinity: the guest's cell); with
    PCI in placement, the providers of those devices hold them there too."""
    from nova import context, objects

    from harness.cloud.inprocess import Cloud, deadline_guard
    ctx = context.get_admin_context()
    with deadline_guard(180, lambda: "pci boot"), Cloud(scenario(in_placement)) as cloud:
        from nova import conf
        assert "PciPassthroughFilter" in conf.CONF.filter_scheduler.enabled_filters
        assert conf.CONF.filter_scheduler.pci_in_placement is conf.CONF.pci.report_in_placement \
            is in_placement
        cloud.boot("vm1", "vf", "host-a")
        cloud.boot("vm2", "nic", "host-a")
        fake = cloud.libvirt_host("host-a")
        names = {cloud.server(n)["OS-EXT-SRV-ATTR:instance_name"]: cloud.servers[n]
                 for n in ("vm1", "vm2")}
        held = {a: names[d["held_by"]] for a, d in fake.pci_truth().items() if d["held_by"]}
        (vf,) = {VF1, VF2} & set(held)  # Nova picks which VF
        assert held == {vf: cloud.servers["vm1"], NIC_ADDR: cloud.servers["vm2"]}
        node = objects.ComputeNode.get_by_nodename(ctx, "host-a")
        db = {d.address: d for d in objects.PciDeviceList.get_by_compute_node(ctx, node.id)}
        tracked = {({VF1, VF2} - {vf}).pop(): ("available", None),
                   vf: ("allocated", cloud.servers["vm1"]), NIC_ADDR: ("allocated", cloud.servers["vm2"])}
        if not in_placement:  # there device_spec leaves the PF out
            tracked[PF_ADDR] = ("unavailable", None)
        assert {a: (d.status, d.instance_uuid) for a, d in db.items()} == tracked
        assert {a: d.numa_node for a, d in db.items()} == {
            a: d["numa_node"] for a, d in fake.pci_truth().items() if a in tracked}
        tracker = cloud.compute("host-a").manager.rt.pci_tracker
        assert {d.address: d.instance_uuid for d in tracker.pci_devs if d.instance_uuid} == held
        for server, addr in (("vm1", vf), ("vm2", NIC_ADDR)):
            guest = objects.Instance.get_by_uuid(ctx, cloud.servers[server],
                                                 expected_attrs=["numa_topology"])
            cell = fake.pci_truth()[addr]["numa_node"]
            assert [c.id for c in guest.numa_topology.cells] == [cell]
            assert fake.ground_truth()[cell]["pci"] == {addr: guest.name}
        want = {f"host-a_{PF_ADDR}": {"CUSTOM_PCI_8086_1515": 1},
                f"host-a_{NIC_ADDR}": {"CUSTOM_PCI_8086_1533": 1}} if in_placement else {}
        assert {n: u for n, u in pci_usages(cloud).items() if u} == want
        cloud.delete("vm1")
        assert fake.pci_truth()[vf]["held_by"] is None


def test_a_host_reads_its_own_pci_config(nova):
    """host-b alone reports PCI in placement and leaves its PF out of device_spec;
    host-a keeps the cloud's: each compute reads its own, the API and scheduler
    the cloud's."""
    from nova import conf, context, objects

    from harness import scenario as scenarios
    from harness.cloud.inprocess import Cloud, deadline_guard
    own = {"report_in_placement": True,
           "device_spec": [{"vendor_id": "8086", "product_id": p} for p in ("1515", "1533")]}
    s = scenarios.from_dict(scenario_dict(pci_hosts={"host-b": own}), "pci.toml")
    ctx = context.get_admin_context()
    with deadline_guard(180, lambda: "per-host pci"), Cloud(s) as cloud:
        assert conf.CONF.pci.report_in_placement is False and len(conf.CONF.pci.device_spec) == 3
        cloud.boot("vm1", "vf", "host-b")
        kinds = {}
        for host in ("host-a", "host-b"):
            node = objects.ComputeNode.get_by_nodename(ctx, host)
            kinds[host] = sorted(d.dev_type for d in objects.PciDeviceList.get_by_compute_node(ctx, node.id))
        assert kinds == {"host-a": ["type-PCI", "type-PF", "type-VF", "type-VF"],
                         "host-b": ["type-PCI", "type-VF", "type-VF"]}
        providers = pci_usages(cloud)
        assert sorted(providers) == ["host-b_0000:81:00.0", "host-b_0000:82:00.0"]
        assert providers["host-b_0000:82:00.0"] == {"CUSTOM_PCI_8086_1515": 1}  # its PF on cell 1
        held = [a for a, d in cloud.libvirt_host("host-b").pci_truth().items() if d["held_by"]]
        assert [cloud.libvirt_host("host-b").pci_truth()[a]["parent"] for a in held] == ["0000:82:00.0"]


def test_a_scenario_without_pci_configures_none(nova):
    from nova import conf

    from harness import scenario as scenarios
    from harness.cloud.inprocess import Cloud, deadline_guard
    s = scenarios.load("pinned-hugepages")
    assert s.pci is None and all(h.pci == () for h in s.hosts)
    with deadline_guard(120, lambda: "no pci"), Cloud(s) as cloud:
        assert "PciPassthroughFilter" not in conf.CONF.filter_scheduler.enabled_filters
        assert conf.CONF.pci.device_spec == [] and conf.CONF.pci.alias == []
        assert cloud.libvirt_host("host-a").listDevices("pci", 0) == {}.keys()
