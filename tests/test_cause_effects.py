"""A cause's effect is undone exactly, on plain views: no Nova needed.

Each vocabulary word (a tracker's cells and counters, a placement consumer's
allocation, a host's leftover domain, an expect naming a view's finding)
explains a checkpoint's findings only with the scenario's exact values: the
same words with another flavor leave findings behind.
"""
import copy

import pytest

from harness import scenario
from harness.errors import InvalidScenario
from harness.oracles import causes, checks
from harness.oracles.ledger import Holding, Phase, placement_resources
from harness.execute.runner import Checkpoint

SCEN = scenario.load("pinned-hugepages")
OLD, NEW = causes.flavors_of(SCEN, "vm1")["old"], causes.flavors_of(SCEN, "vm1")["new"]
CELLS = [{"cell": 1, "cpus": [6, 7], "pages": {2048: 512}, "small_pages": 0, "memory_mb": 1024,
          "shared": 0}]


def _cell(cpus=(), pages=None, memory=0):
    return {"cpus": list(cpus), "pages": dict(pages or {}), "small_pages": 0, "memory_mb": memory,
            "shared": 0}


def _snap():
    """vm1 at rest on host-a (its tracker, domain and allocation right), nothing on host-b."""
    rt = {h: {"vcpus_used": 0, "memory_mb_used": 512, "cells": {0: _cell(), 1: _cell()}}
          for h in ("host-a", "host-b")}
    rt["host-a"].update(vcpus_used=OLD.vcpus, memory_mb_used=512 + OLD.memory_mb)
    rt["host-a"]["cells"][1] = _cell([6, 7], {2048: 512}, 1024)
    truth = {h: {"running": {0: _cell(), 1: _cell()}, "defined": {0: _cell(), 1: _cell()}}
             for h in ("host-a", "host-b")}
    truth["host-a"]["running"][1] = truth["host-a"]["defined"][1] = _cell([6, 7], {2048: 512}, 1024)
    resources = placement_resources(OLD)
    return {"rt": rt, "truth": truth, "numa": {"vm1": {"current": CELLS, "old": None, "new": None}},
            "placement": {"allocations": {"vm1 instance": {"host-a": dict(resources)},
                                          "vm1 migration": {}},
                          "usages": {"host-a": dict(resources), "host-b": {}}}}


def _orphaned():
    """The migration's allocation (old flavor) left on host-a: the restart's orphan."""
    snap = _snap()
    snap["placement"]["allocations"]["vm1 migration"] = {"host-a": placement_resources(OLD)}
    for rc, n in placement_resources(OLD).items():
        snap["placement"]["usages"]["host-a"][rc] += n
    return snap


PHASE = Phase("after-restart", (Holding("host-a", "vm1", "instance", OLD),), {})


def _checkpoint(snap):
    ctx = checks.CheckContext(None, PHASE, snap, True, 512, "", {})
    cp = Checkpoint("after-restart", checks.run_ledger(ctx))
    cp.evidence = checks.Evidence.of(ctx, None)
    return cp


def _bound(*effects, expects=()):
    cause = causes.Cause("c", "hard", "", "", "", ("restart",), ("*",), {"runs_on": ("source",)},
                         tuple(effects), tuple(expects))
    return causes.Bound(cause, "vm1", {"source": "host-a", "dest": "host-b"})


def _effect(host, sign, flavor, **kw):
    return causes.Effect(("after-*",), host, sign, flavor, kw.pop("cells", None), **kw)


def test_the_views_as_the_ledger_says_give_no_findings():
    assert _checkpoint(_snap()).findings == []


def test_an_orphaned_allocation_is_a_placement_effect_with_the_exact_flavor():
    cp = _checkpoint(_orphaned())
    assert {f.where for f in cp.findings} == {"allocations of vm1 migration",
                                              "host-a provider usages"}
    right = _bound(_effect("source", 1, "old", consumer="migration", persists=True))
    assert causes.residual(cp, (right,), SCEN) == []
    wrong = _bound(_effect("source", 1, "new", consumer="migration", persists=True))
    assert causes.residual(cp, (wrong,), SCEN) != []


def test_a_leftover_domain_and_the_tracker_holding_it_are_two_effects():
    snap = _snap()
    snap["truth"]["host-b"]["defined"][1] = _cell([6, 7], {2048: 512}, 1024)
    snap["rt"]["host-b"]["cells"][1] = _cell([6, 7], {2048: 512}, 1024)
    cp = _checkpoint(snap)
    assert cp.findings  # the tracker holds a guest the ledger has elsewhere
    tracker = _effect("dest", 1, "old", cells="current", counters=False)
    domain = _effect("dest", 1, "old", cells="current", counters=False, persists=True,
                     domain="defined")
    assert causes.residual(cp, (_bound(tracker, domain),), SCEN) == []
    left = causes.residual(cp, (_bound(tracker),), SCEN)  # the domain is still there
    assert left and all("vs domains" in f.where for f in left)


def test_an_expect_may_name_a_views_finding():
    """A tracker holding none of what the ledger says (Nova never chose its cells)."""
    snap = _snap()
    snap["rt"]["host-a"]["cells"][1] = _cell()
    snap["truth"]["host-a"]["running"][1] = snap["truth"]["host-a"]["defined"][1] = _cell()
    cp = _checkpoint(snap)
    assert cp.findings and {f.check for f in cp.findings} == {"rt", "truth"}
    empty = [causes.Expect(("after-restart",), check, "{source} *", ("0", "[]", "{}"))
             for check in ("rt", "truth")]
    assert causes.residual(cp, (_bound(expects=empty),), SCEN) == []
    other = [causes.Expect(("after-restart",), "rt", "{dest} *", ("0", "[]", "{}"))]
    assert causes.residual(cp, (_bound(expects=other),), SCEN) == cp.findings


def test_undoing_leaves_the_evidence_as_it_was():
    snap = _snap()
    snap["placement"]["usages"]["host-b"] = placement_resources(NEW)
    cp = _checkpoint(snap)
    before = copy.deepcopy(cp.evidence.snap)
    causes.residual(cp, (_bound(_effect("dest", 1, "new", consumer="instance")),), SCEN)
    assert cp.evidence.snap == before


def test_parts_name_which_holdings_of_the_cells_an_effect_moves():
    """A destination's tracker left with a guest's pins but not its memory and pages
    (the delete freed another topology's, clamped at zero): only ``parts = cpus`` says it."""
    snap = _snap()
    snap["rt"]["host-b"]["cells"][1] = _cell([6, 7])
    cp = _checkpoint(snap)
    assert cp.findings
    pins = _effect("dest", 1, "old", cells="current", counters=False, parts=("cpus",))
    assert causes.residual(cp, (_bound(pins),), SCEN) == []
    whole = _effect("dest", 1, "old", cells="current", counters=False)
    left = causes.residual(cp, (_bound(whole),), SCEN)
    assert left and not any("pinned" in f.where for f in left)  # memory and pages now short


def test_an_effect_of_another_layout_explains_nothing_here():
    snap = _snap()
    snap["rt"]["host-b"]["cells"][1] = _cell([6, 7])
    cp = _checkpoint(snap)
    elsewhere = _effect("dest", 1, "old", cells="current", counters=False, parts=("cpus",),
                        scenarios=("numa-spanning",))
    assert causes.residual(cp, (_bound(elsewhere),), SCEN) == cp.findings
    not_here = _effect("dest", 1, "old", cells="current", counters=False, parts=("cpus",),
                       scenarios=("!pinned-hugepages",))
    assert causes.residual(cp, (_bound(not_here),), SCEN) == cp.findings


@pytest.mark.parametrize("effect, says", [
    ('{ at = "x", host = "source", counts = "old", consumer = "migration", cells = "old" }',
     "a placement effect names a consumer"),
    ('{ at = "x", host = "source", counts = "old", consumer = "guest" }',
     "a placement effect names a consumer"),
    ('{ at = "x", host = "source", counts = "old", domain = "defined" }',
     "a domain effect"),
    ('{ at = "x", host = "source", counts = "old", cells = "old", domain = "paused" }',
     "a domain effect"),
    ('{ at = "x", host = "source", counts = "old", cells = "old", parts = "pins" }',
     "parts name its cells' holdings"),
    ('{ at = "x", host = "source", counts = "old", parts = "cpus" }',
     "parts name its cells' holdings"),
])
def test_a_malformed_effect_is_one_line(tmp_path, effect, says):
    path = tmp_path / "c.toml"
    path.write_text(f'[[cause]]\nname = "c"\nclass = "hard"\ntitle = "t"\n'
                    f'when = {{ runs_on = "source" }}\neffect = [{effect}]\n')
    with pytest.raises(InvalidScenario, match=says) as exc:
        causes.load(str(path))
    assert "\n" not in str(exc.value)


def test_the_suggester_finds_the_effect_a_reviewer_would_write():
    """An orphaned migration allocation: `causes --suggest` proposes exactly that effect."""
    from harness.oracles import suggest
    cp = _checkpoint(_orphaned())
    chosen, left = suggest.for_checkpoint(cp, {"vm1": {"source": "host-a", "dest": "host-b"}}, SCEN)
    assert left == []
    assert [(server, suggest.toml_line("after-delete", e)) for server, e in chosen] == [
        ("vm1", '{ at = "after-delete", host = "source", counts = "old", consumer = "migration" },')]


def test_a_log_line_that_is_the_exception_is_named_by_it():
    """The log check once said "no exception" where the log held exactly that exception
    (a traceback's last line matched the pattern itself)."""
    lines = ["2026-12-04 ERROR nova.compute.manager Error updating resources for node h.",
             "Traceback (most recent call last):",
             "    raise exception.CPUPinningInvalid(requested=list(cpus),",
             "nova.exception.CPUPinningInvalid: CPU set to pin [1] must be a subset of [2]"]
    assert checks.with_cause(lines, 3).endswith(" <- CPUPinningInvalid")
    assert checks.with_cause(lines, 0).endswith(" <- CPUPinningInvalid: CPU set to pin [1] "
                                                "must be a subset of [2]")
    assert " <- " not in checks.with_cause(lines, 2)  # the traceback's source line
    seen = [checks.with_cause(lines, i) for i in (2, 3)]
    finding = checks.Finding("logs", "log lines matching 'CPUPinningInvalid'", [], seen)
    assert checks.value_of(finding) == "CPUPinningInvalid"
