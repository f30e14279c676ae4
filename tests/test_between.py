"""Inside a step each host holds exactly one settled phase's share: the oracle, on hand-made views.

No Nova here: the views are built directly, so the rule is shown to fire
on the states it exists for (a host holding less than both phases, the
1944759 drop; a mix of the two) and to hold on the states a correct step
passes through.
"""
import types

from harness.operations import LIVE_MIGRATION, RESIZE
from harness.oracles import checks, ledger
from harness.scenario import Flavor

OLD = Flavor("old", 2, 1024, 1, {"hw:cpu_policy": "dedicated", "hw:mem_page_size": "2048"})
NEW = Flavor("new", 4, 2048, 1, {"hw:cpu_policy": "dedicated", "hw:mem_page_size": "2048"})
PAGE = 2048
OLD_CELLS = [{"cell": 0, "cpus": [2, 3], "pages": {PAGE: 512}, "small_pages": 0,
              "memory_mb": 1024, "shared": 0}]
NEW_CELLS = [{"cell": 1, "cpus": [6, 7, 8, 9], "pages": {PAGE: 1024}, "small_pages": 0,
              "memory_mb": 2048, "shared": 0}]
# the server's holdings around the confirm step: host-a the old flavor (migration), host-b the new
VERIFY = ledger.Phase("verify-resize", (
    ledger.Holding("host-a", "vm1", "migration", OLD, running=False, topology="old"),
    ledger.Holding("host-b", "vm1", "instance", NEW, topology="new")), {})
CONFIRMED = ledger.Phase("after-confirm", (
    ledger.Holding("host-b", "vm1", "instance", NEW, topology="new"),), {})
IN_CONFIRM = ledger.Phase("in-confirm", None, {}, (VERIFY, CONFIRMED))


def rt(cells_a, cells_b, flavor_a, flavor_b):
    def host(cells, flavor):
        view = {c["cell"]: {k: c[k] for k in ("cpus", "pages", "small_pages", "memory_mb", "shared")}
                for c in cells}
        return {"vcpus_used": flavor.vcpus if flavor else 0,
                "memory_mb_used": flavor.memory_mb if flavor else 0, "cells": view}
    return {"host-a": host(cells_a, flavor_a), "host-b": host(cells_b, flavor_b)}


def ctx(rt_view, numa, chosen=None, allocations=None):
    placement = {"allocations": allocations or {}, "usages": {}}
    snap = {"rt": rt_view, "numa": {"vm1": numa}, "placement": placement}
    return checks.CheckContext(None, IN_CONFIRM, snap, False, 0, "", chosen or {})


WITH_CONTEXT = {"current": NEW_CELLS, "old": OLD_CELLS, "new": NEW_CELLS}
NO_CONTEXT = {"current": NEW_CELLS, "old": None, "new": None}


def test_a_source_before_its_drop_and_one_after_it_both_hold():
    before = rt(OLD_CELLS, NEW_CELLS, OLD, NEW)
    after = rt([], NEW_CELLS, None, NEW)
    assert checks.rt_matches_ledger(ctx(before, WITH_CONTEXT)) == []
    assert checks.rt_matches_ledger(ctx(after, NO_CONTEXT)) == []


def test_the_old_topology_is_remembered_once_the_context_is_gone():
    before = rt(OLD_CELLS, NEW_CELLS, OLD, NEW)  # the context dropped, the claim not yet
    assert checks.rt_matches_ledger(ctx(before, NO_CONTEXT, chosen={"vm1": WITH_CONTEXT})) == []


def test_a_host_holding_part_of_the_old_flavor_is_a_finding_against_the_nearer_phase():
    half = [dict(OLD_CELLS[0], cpus=[2])]  # one pin dropped, everything else still held
    found = checks.rt_matches_ledger(ctx(rt(half, NEW_CELLS, OLD, NEW), WITH_CONTEXT))
    assert {f.where for f in found} == {
        "host-a pinned pCPUs (nearest: verify-resize)",
        "host-a cell 0 pinned cpus (vs NUMA topologies) (nearest: verify-resize)"}


def test_the_destination_losing_its_new_flavor_mid_step_is_a_finding():
    found = checks.rt_matches_ledger(ctx(rt(OLD_CELLS, [], OLD, None), WITH_CONTEXT))
    assert found and all(f.where.startswith("host-b ") for f in found)


def test_placement_must_be_one_phase_as_a_whole():
    verify = {"vm1 migration": {"host-a": {"DISK_GB": 1, "MEMORY_MB": 1024, "PCPU": 2}},
              "vm1 instance": {"host-b": {"DISK_GB": 1, "MEMORY_MB": 2048, "PCPU": 4}}}
    confirmed = {"vm1 instance": verify["vm1 instance"]}
    lost = {"vm1 migration": verify["vm1 migration"]}
    good = [checks.placement_matches_ledger(ctx({}, NO_CONTEXT, allocations=a))
            for a in (verify, confirmed)]
    assert good == [[], []]
    found = checks.placement_matches_ledger(ctx({}, NO_CONTEXT, allocations=lost))
    assert [f.where for f in found] == ["allocations of vm1 instance (nearest: verify-resize)"]


def test_the_step_phases_come_from_the_ledger():
    move = types.SimpleNamespace(server="vm1", flavor="new")
    scen = types.SimpleNamespace(
        flavors={"old": OLD, "new": NEW}, boots=[types.SimpleNamespace(server="vm1", flavor="old")],
        moves=[move], subject=move, operation=RESIZE)
    placed, moved = {"vm1": "host-a"}, {"vm1": "host-b"}
    prep = ledger.phase(scen, placed, moved, "in-prep")
    assert prep.holdings is None
    assert [p.name for p in prep.between] == ["after-boot", "verify-resize"]
    revert = ledger.phase(scen, placed, moved, "in-revert")
    assert [p.name for p in revert.between] == ["verify-resize", "after-revert"]
    assert revert.between[1].holdings == (
        ledger.Holding("host-a", "vm1", "instance", OLD, topology="old"),)


def test_a_server_that_moved_before_the_subject_is_past_its_own_step():
    """Crossing moves: the other server moved (and ends) first, so it is never back at after-boot."""
    first = types.SimpleNamespace(server="vm2", flavor="new")
    subject = types.SimpleNamespace(server="vm1", flavor="new")
    scen = types.SimpleNamespace(
        flavors={"old": OLD, "new": NEW},
        boots=[types.SimpleNamespace(server=s, flavor="old") for s in ("vm1", "vm2")],
        moves=[first, subject], subject=subject, operation=RESIZE)
    placed, moved = {"vm1": "host-a", "vm2": "host-b"}, {"vm1": "host-b", "vm2": "host-a"}
    before_claim = ledger.phase(scen, placed, moved, "in-prep").between[0]
    assert {(h.server, h.consumer, h.host) for h in before_claim.holdings} == {
        ("vm1", "instance", "host-a"), ("vm2", "migration", "host-b"), ("vm2", "instance", "host-a")}
    before_step = ledger.phase(scen, placed, moved, "in-confirm", stepping="vm1").between[0]
    assert {(h.server, h.consumer, h.host) for h in before_step.holdings} == {
        ("vm1", "migration", "host-a"), ("vm1", "instance", "host-b"), ("vm2", "instance", "host-a")}
    # past the subject's core, before any ending has begun: every move is at VERIFY_RESIZE
    # (measured on crossing: the source finishes resize_instance after the destination's
    # finish_resize; a ledger that had the first server confirmed failed 72 items there)
    not_begun = ledger.phase(scen, placed, moved, "in-confirm").between[0]
    assert {(h.server, h.consumer, h.host) for h in not_begun.holdings} == {
        ("vm1", "migration", "host-a"), ("vm1", "instance", "host-b"),
        ("vm2", "migration", "host-b"), ("vm2", "instance", "host-a")}
    # the first server's own confirm (the subject's window is open through it): vm1 not yet
    first_step = ledger.phase(scen, placed, moved, "in-confirm", stepping="vm2").between
    assert {(h.server, h.consumer, h.host) for h in first_step[1].holdings} == {
        ("vm1", "migration", "host-a"), ("vm1", "instance", "host-b"), ("vm2", "instance", "host-a")}


def test_a_live_migration_holds_both_hosts_in_flight_and_one_after():
    """In flight the source holds for the migration, the destination for the instance;
    each ending is a step from there to one host; the bystander stays put."""
    move = types.SimpleNamespace(server="vm1", flavor="old")
    scen = types.SimpleNamespace(
        flavors={"old": OLD}, operation=LIVE_MIGRATION, moves=[move], subject=move,
        boots=[types.SimpleNamespace(server=s, flavor="old") for s in ("vm1", "vm2")])
    placed, moved = {"vm1": "host-a", "vm2": "host-b"}, {"vm1": "host-b"}
    flight = ledger.phase(scen, placed, moved, "in-flight")
    assert {(h.server, h.consumer, h.host) for h in flight.holdings} == {
        ("vm1", "migration", "host-a"), ("vm1", "instance", "host-b"), ("vm2", "instance", "host-b")}
    assert flight.allocations()["vm1 migration"] == {"host-a": ledger.placement_resources(OLD)}
    assert [p.name for p in ledger.phase(scen, placed, moved, "in-prep").between] == [
        "after-boot", "in-flight"]
    for ending, host, status in (("success", "host-b", "completed"),
                                 ("rollback", "host-a", "failed")):
        step = ledger.phase(scen, placed, moved, f"in-{ending}")
        assert [p.name for p in step.between] == ["in-flight", f"after-{ending}"]
        after = ledger.phase(scen, placed, moved, f"after-{ending}")
        assert {(h.server, h.host) for h in after.holdings} == {("vm1", host), ("vm2", "host-b")}
        assert after.status == {"vm1": ("ACTIVE", status), "vm2": ("ACTIVE", None)}
