"""The fake libvirt host really holds pCPUs and hugepages, and says so."""
import pytest

from fake_driver import topology

HOST = {"name": "h", "cells": 2, "cores": 2, "threads": 1, "memory_mb": 2048,
        "hugepages": {"2M": [256, 256]}}


def xml(name, pcpus, cell, mem_kib=524288, page=2048):
    pins = "".join(f'<vcpupin vcpu="{i}" cpuset="{c}"/>' for i, c in enumerate(pcpus))
    return f"""<domain><name>{name}</name><uuid>{name}</uuid><memory>{mem_kib}</memory>
      <vcpu>{len(pcpus)}</vcpu><os><type>hvm</type></os><devices/>
      <cputune>{pins}</cputune>
      <cpu><numa><cell id="0" cpus="0-{len(pcpus) - 1}" memory="{mem_kib}" unit="KiB"/></numa></cpu>
      <numatune><memnode cellid="0" nodeset="{cell}"/></numatune>
      <memoryBacking><hugepages><page size="{page}" unit="KiB" nodeset="0"/></hugepages></memoryBacking>
    </domain>"""


@pytest.fixture
def host(nova):
    from fake_driver.host import FakeLibvirtHost
    return FakeLibvirtHost(topology.host_from_dict(HOST), frozenset({0, 1, 2, 3}))


def test_running_domain_holds_exactly_its_claim(host):
    dom = host.defineXML(xml("a", [2, 3], 1))
    assert host.ground_truth()[1]["cpus"] == frozenset()  # defined is not running
    dom.create()
    truth = host.ground_truth()
    assert truth[1]["cpus"] == {2, 3} and truth[1]["pages"] == {2048: 256}
    assert truth[1]["by_domain"] == {"a": {"cpus": frozenset({2, 3}), "pages": {2048: 256},
                                           "memory_kb": 524288, "shared": 0,
                                           "pci": frozenset()}}
    assert truth[0]["cpus"] == frozenset() and truth[0]["pages"] == {}
    dom.destroy()
    assert host.ground_truth()[1]["cpus"] == frozenset()
    assert host.defined_claims()[1]["cpus"] == {2, 3}  # still defined: reserved for revert
    dom.undefine()
    assert host.defined_claims()[1]["by_domain"] == {}


def test_pin_conflict_is_a_libvirt_error(host, nova):
    from nova.tests.fixtures import libvirt as fakelibvirt
    host.defineXML(xml("a", [2], 1, mem_kib=2048)).create()
    second = host.defineXML(xml("b", [2], 1, mem_kib=2048))
    with pytest.raises(fakelibvirt.libvirtError, match=r"pCPU\(s\) 2 on cell 1 already pinned by a"):
        second.create()
    assert not second.isActive()
    assert host.ground_truth()[1]["by_domain"].keys() == {"a"}


def test_hugepage_exhaustion_is_a_libvirt_error(host, nova):
    from nova.tests.fixtures import libvirt as fakelibvirt
    host.defineXML(xml("a", [0], 0, mem_kib=262144 * 2)).create()     # all 256 pages of cell 0
    with pytest.raises(fakelibvirt.libvirtError, match="needs 1 2048 KiB pages on cell 0, 0 of 256 free"):
        host.defineXML(xml("b", [1], 0, mem_kib=2048)).create()


def small_xml(name, vcpus, cell, mem_kib, floating="0-1"):
    """A NUMA guest on small pages whose vCPUs float over ``floating``."""
    pins = "".join(f'<vcpupin vcpu="{i}" cpuset="{floating}"/>' for i in range(vcpus))
    return f"""<domain><name>{name}</name><uuid>{name}</uuid><memory>{mem_kib}</memory>
      <vcpu>{vcpus}</vcpu><os><type>hvm</type></os><devices/><cputune>{pins}</cputune>
      <cpu><numa><cell id="0" cpus="0-{vcpus - 1}" memory="{mem_kib}" unit="KiB"/></numa></cpu>
      <numatune><memnode cellid="0" nodeset="{cell}"/></numatune></domain>"""


def test_small_page_guests_hold_their_cell_memory_and_floating_vcpus(host, nova):
    from nova.tests.fixtures import libvirt as fakelibvirt
    host.defineXML(small_xml("a", 2, 0, 1048576)).create()  # 1 GiB of cell 0's 1.5 GiB of 4K
    held = host.ground_truth()[0]
    assert held["pages"] == {4: 262144} and held["memory_kb"] == 1048576 and held["shared"] == 2
    assert held["cpus"] == frozenset()  # floating vCPUs own no pCPU
    with pytest.raises(fakelibvirt.libvirtError, match="needs 262144 4 KiB pages on cell 0, "
                       "131072 of 393216 free"):
        host.defineXML(small_xml("b", 1, 0, 1048576)).create()


def test_unknown_pcpu_is_refused(host, nova):
    from nova.tests.fixtures import libvirt as fakelibvirt
    with pytest.raises(fakelibvirt.libvirtError, match="pCPU 42 does not exist"):
        host.defineXML(xml("a", [42], 0))


def test_capabilities_show_the_declared_layout(host):
    caps = host.host_info.numa_topology
    assert [[c.id for c in cell.cpus] for cell in caps.cells] == [[0, 1], [2, 3]]
    assert [(p.size, p.total) for p in caps.cells[1].mempages] == [(4, 393216), (2048, 256)]  # 2 GiB - 512 MiB of 2M pages


# -- live migration (fake_driver.migration) ------------------------------------
B = {"name": "b", "cells": 1, "cores": 4, "threads": 1, "memory_mb": 2048,
     "hugepages": {"2M": [512]}}


@pytest.fixture
def pair(nova):
    """Two hosts that can reach each other, a pinned guest running on the first."""
    from fake_driver.host import FakeLibvirtHost
    peers = {}
    a = FakeLibvirtHost(topology.host_from_dict(HOST), frozenset({0, 1, 2, 3}), peers=peers)
    b = FakeLibvirtHost(topology.host_from_dict(B), frozenset({0, 1, 2, 3}), peers=peers)
    dom = a.defineXML(xml("g", [2, 3], 1))
    dom.create()
    return a, b, dom


def migrate(dom, pins, cell=0, to="b"):
    from nova.tests.fixtures import libvirt as fakelibvirt
    # what Nova sends: the fake XMLDesc (no guest NUMA cells, no memory backing), re-pinned
    dest_xml = dom.XMLDesc(0).replace('cpuset="2"', f'cpuset="{pins[0]}"').replace(
        'cpuset="3"', f'cpuset="{pins[1]}"').replace('nodeset="1"', f'nodeset="{cell}"')
    flags = fakelibvirt.VIR_MIGRATE_UNDEFINE_SOURCE | fakelibvirt.VIR_MIGRATE_PERSIST_DEST
    dom.migrateToURI3(f"qemu+tcp://{to}/system", {"destination_xml": dest_xml}, flags)


def test_a_migration_job_holds_both_hosts_until_it_completes(pair, nova):
    from nova.tests.fixtures import libvirt as fakelibvirt
    a, b, dom = pair
    migrate(dom, [0, 1])
    assert a.ground_truth()[1]["cpus"] == {2, 3}
    assert b.ground_truth()[0]["by_domain"]["g"] == {
        "cpus": frozenset({0, 1}), "pages": {2048: 256}, "memory_kb": 524288, "shared": 0,
        "pci": frozenset()}
    assert dom.jobStats()["type"] == fakelibvirt.VIR_DOMAIN_JOB_COMPLETED
    assert a.ground_truth()[1]["by_domain"] == {} and "g" not in a._vms  # stopped, undefined
    assert b.ground_truth()[0]["cpus"] == {0, 1}
    incoming = b.lookupByUUIDString("g")
    assert incoming.isPersistent() and not incoming._transient


def test_a_failed_job_releases_the_destination_and_the_source_runs_on(pair, nova):
    from nova.tests.fixtures import libvirt as fakelibvirt
    a, b, dom = pair
    a.job_outcome = "fail"
    migrate(dom, [0, 1])
    assert dom.jobStats()["type"] == fakelibvirt.VIR_DOMAIN_JOB_FAILED
    assert b.ground_truth()[0]["by_domain"] == {} and "g" not in b._vms
    assert a.ground_truth()[1]["cpus"] == {2, 3} and dom.isActive()


def test_a_migration_the_destination_cannot_hold_is_refused(pair, nova):
    from nova.tests.fixtures import libvirt as fakelibvirt
    a, b, dom = pair
    b.defineXML(xml("other", [1], 0, mem_kib=2048)).create()
    with pytest.raises(fakelibvirt.libvirtError, match=r"pCPU\(s\) 1 on cell 0 already pinned by other"):
        migrate(dom, [0, 1])
    assert b.ground_truth()[0]["by_domain"].keys() == {"other"}
    with pytest.raises(fakelibvirt.libvirtError, match="unable to connect to server"):
        migrate(dom, [0, 1], to="nowhere")


def test_defining_a_running_domain_keeps_what_it_holds_releasable(pair):
    a, _, dom = pair
    same = a.defineXML(xml("g", [2, 3], 1))  # Nova persists the incoming guest this way
    assert same is dom and a.ground_truth()[1]["cpus"] == {2, 3}
    a.lookupByUUIDString("g").destroy()
    assert a.ground_truth()[1]["by_domain"] == {}


@pytest.mark.parametrize("outcome", ["complete", "fail"])
def test_the_real_libvirt_driver_live_migrates_between_fake_hosts(nova, outcome):
    """Nova's own live migration (API, conductor, both computes, LibvirtDriver's
    job monitor) on fake hosts: the guest ends where the job's outcome says,
    holding exactly its pins and pages there and nothing elsewhere."""
    from harness import scenario
    from harness.cloud.inprocess import Cloud, deadline_guard
    with deadline_guard(180, lambda: f"live migration ({outcome})"), \
            Cloud(scenario.load("pinned-hugepages")) as cloud:
        cloud.boot("vm1", "small", "host-a")
        cloud.libvirt_host("host-a").job_outcome = outcome
        server = cloud.live_migrate("vm1", "host-b")
        home, away = ("host-b", "host-a") if outcome == "complete" else ("host-a", "host-b")
        assert server["OS-EXT-SRV-ATTR:host"] == home
        held = {h: [(len(c["cpus"]), c["pages"]) for c in cloud.libvirt_host(h).ground_truth().values()
                    if c["by_domain"]] for h in (home, away)}
        assert held == {home: [(2, {2048: 512})], away: []}
        assert ("Migration operation has aborted" in cloud.log_text()) == (outcome == "fail")


def test_shelve_offload_frees_every_host_and_unshelve_holds_the_chosen_one(nova):
    from harness import scenario
    from harness.cloud.inprocess import Cloud, deadline_guard

    def held(cloud):
        return {h: [(len(c["cpus"]), c["pages"]) for c in cloud.libvirt_host(h).ground_truth().values()
                    if c["by_domain"]] for h in ("host-a", "host-b")}
    with deadline_guard(180, lambda: "shelve/unshelve"), \
            Cloud(scenario.load("pinned-hugepages")) as cloud:
        cloud.boot("vm1", "small", "host-a")
        assert cloud.shelve_offload("vm1")["OS-EXT-SRV-ATTR:host"] is None
        assert held(cloud) == {"host-a": [], "host-b": []}
        assert cloud.unshelve("vm1", "host-b")["OS-EXT-SRV-ATTR:host"] == "host-b"
        assert held(cloud) == {"host-a": [], "host-b": [(2, {2048: 512})]}
