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
                                           "memory_kb": 524288, "shared": 0}}
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
