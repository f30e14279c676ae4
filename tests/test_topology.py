"""Declarative topology and domain XML parsing (pure data, no Nova)."""
import pytest

from fake_driver import domain_xml, topology
from harness.errors import InvalidTopology

HOST = {"name": "h", "cells": 2, "cores": 4, "threads": 2, "memory_mb": 4096,
        "hugepages": {"2M": [512, 256], "1G": [1, 0]}}


def test_host_layout():
    h = topology.host_from_dict(HOST)
    assert [c.cpus for c in h.cells] == [tuple(range(8)), tuple(range(8, 16))]
    assert h.cells[0].hugepages == {2048: 512, 1048576: 1}
    assert h.cells[1].hugepages == {2048: 256}
    assert h.cell_of(9) == 1


@pytest.mark.parametrize("change, message", [
    ({"cells": 0}, "'cells' must be an integer >= 1"),
    ({"cores": "four"}, "'cores' must be an integer"),
    ({"hugepages": {"3M": [1, 1]}}, "hugepage size '3M' unknown"),
    ({"hugepages": {"2M": [1]}}, "must list 2 non-negative counts"),
    ({"hugepages": {"1G": [5, 0]}}, "cell 0 hugepages need 5120 MiB but the cell has 4096 MiB"),
    ({"sockets": 9}, "at most 64 supported"),
    ({"colour": "red"}, "unknown key(s) ['colour']"),
])
def test_malformed_host_is_one_clear_line(change, message):
    with pytest.raises(InvalidTopology) as exc:
        topology.host_from_dict({**HOST, **change}, "hosts[0]")
    assert message in str(exc.value)
    assert "hosts[0] 'h'" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_cpu_sets_are_checked_against_every_host():
    h = topology.host_from_dict(HOST)
    with pytest.raises(InvalidTopology, match="no CPUs 16-17"):
        topology.cpu_sets_from_dict({"cpu_dedicated_set": "2-17", "cpu_shared_set": "0-1"}, [h])
    with pytest.raises(InvalidTopology, match="in both"):
        topology.cpu_sets_from_dict({"cpu_dedicated_set": "0-3", "cpu_shared_set": "3"}, [h])
    with pytest.raises(InvalidTopology, match="bad CPU list"):
        topology.cpu_sets_from_dict({"cpu_dedicated_set": "3-1"}, [h])


def test_cpu_set_round_trip():
    assert topology.format_cpu_set(topology.parse_cpu_set("0-2,5,7-8", "x")) == "0-2,5,7-8"


GUEST = """<domain><name>g</name>
  <cputune><emulatorpin cpuset="0-1"/><vcpupin vcpu="0" cpuset="9"/><vcpupin vcpu="1" cpuset="10"/>
  <vcpupin vcpu="2" cpuset="0-1"/></cputune>
  <cpu><numa><cell id="0" cpus="0-2" memory="1048576" unit="KiB"/></numa></cpu>
  <numatune><memory nodeset="1"/><memnode cellid="0" nodeset="1"/></numatune>
  <memoryBacking><hugepages><page size="2048" unit="KiB" nodeset="0"/></hugepages></memoryBacking>
</domain>"""


def test_claim_reads_pins_and_pages_per_host_cell():
    h = topology.host_from_dict(HOST)
    claim = domain_xml.parse_claim(GUEST, frozenset(range(2, 16)), h.cell_of)
    assert claim.cpus == {1: frozenset({9, 10})}   # the floating pin 0-1 is not exclusive
    assert claim.pages == {(1, 2048): 512}


def test_claim_rejects_a_memnode_spanning_cells():
    h = topology.host_from_dict(HOST)
    with pytest.raises(ValueError, match="spans host cells"):
        domain_xml.parse_claim(GUEST.replace('memnode cellid="0" nodeset="1"',
                                             'memnode cellid="0" nodeset="0-1"'),
                               frozenset(range(16)), h.cell_of)
