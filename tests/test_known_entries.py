"""Every root cause still reproduces, value for value.

CI: one cause per fault kind and device class (nothing injected, the
periodic, its split, a restart, a driver, RPC or placement failure; PCI or
not), resize's first by name where it has one: every kind of effect the
harness undoes and every fault's attribution, on every change. ``tox -e
breadth``: one per operation, fault kind and device class, then every
cause's clearest item (the first of its samples in
``scenarios/cause-samples.toml``), then all of them, up to three scenarios
per cause (the full campaign checks the rest). A Nova that stopped doing what
a cause says, or does it with another value, fails there -- not only in the
hours-long full campaign. (All 93 clearest items were 23 % of CI's test
time; one per operation and fault, 18 causes, 9 %.)
"""
import os
import re

import pytest

from harness import scenario
from harness.execute.item import Item
from harness.front import by_cause
from harness.oracles import causes
from tests.conftest import cli

SAMPLES = by_cause.load_samples(os.path.join(scenario.SCENARIO_DIR, by_cause.SAMPLES_FILE))
#: the scenarios holding some cause's first sample
FIRST = sorted({ids[0].split("/")[0] for ids in SAMPLES.values() if ids})


def _cell(item_id: str) -> tuple:
    """(operation, fault kind, PCI or not) of a sample: what the harness's undo depends on."""
    scen = scenario.load(item_id.split("/")[0])
    item = Item.parse(item_id)
    fault = "uninjected" if item.is_uninjected else item.fault.split(":")[0]
    return type(scen.operation).__name__, fault, bool(scen.pci)


def ci_causes() -> dict:
    """operation -> the causes CI checks: per cell, the first by name."""
    chosen: dict = {}
    for name in sorted(SAMPLES):
        if SAMPLES[name]:
            chosen.setdefault(_cell(SAMPLES[name][0]), name)
    by_operation: dict = {}
    for (operation, _, _), name in sorted(chosen.items()):
        by_operation.setdefault(operation, []).append(name)
    return by_operation


CI_CAUSES = ci_causes()


def kind_causes() -> dict:
    """The causes CI checks: per (fault kind, PCI or not), resize's first by name, else
    the first; grouped as resize's and the others' (for xdist)."""
    chosen: dict = {}
    for name in sorted((n for n in SAMPLES if SAMPLES[n]),
                       key=lambda n: (_cell(SAMPLES[n][0])[0] != "Resize", n)):
        operation, fault, pci = _cell(SAMPLES[name][0])
        chosen.setdefault((fault, pci), (operation, name))
    groups: dict = {}
    for operation, name in sorted(chosen.values()):
        groups.setdefault("resize" if operation == "Resize" else "other", []).append(name)
    return groups


CI_KINDS = kind_causes()




def _known(*args):
    proc = cli("known", "--jobs", "2", *args, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "STALE" not in proc.stdout
    return proc


def _reproduce(names):
    proc = _known("--samples", "1", *(a for n in names for a in ("--cause", n)))
    assert sorted(re.findall(r"^ok    root cause (\S+):", proc.stdout, re.M)) == sorted(names)


@pytest.mark.parametrize("group", sorted(CI_KINDS))
def test_a_cause_per_fault_kind_reproduces_on_its_clearest_item(group):
    """Resize's causes and the others apart, so that xdist spreads them."""
    _reproduce(CI_KINDS[group])


@pytest.mark.breadth
@pytest.mark.parametrize("operation", sorted(CI_CAUSES))
def test_a_cause_per_operation_and_fault_reproduces_on_its_clearest_item(operation):
    """Per operation, so that xdist spreads them."""
    _reproduce(CI_CAUSES[operation])


def test_ci_checks_every_fault_kind_and_device_class_and_breadth_every_operation():
    cells = {_cell(ids[0]) for ids in SAMPLES.values() if ids}
    assert {_cell(SAMPLES[n][0]) for names in CI_CAUSES.values() for n in names} == cells
    assert len(cells) >= 14  # resize x 5 faults, live x 4, evacuate x 4, unshelve, PCI
    kinds = {(fault, pci) for _, fault, pci in cells}
    assert {_cell(SAMPLES[n][0])[1:] for names in CI_KINDS.values() for n in names} == kinds
    assert {fault for fault, _ in kinds} == {"uninjected", "periodic", "split", "restart",
                                             "driver", "rpc", "placement"}


@pytest.mark.breadth
@pytest.mark.parametrize("name", FIRST)
def test_every_root_cause_reproduces_on_its_clearest_item(name):
    """Per scenario, so that xdist spreads them (one run of all took 12 minutes on one worker)."""
    proc = _known("--scenario", name, "--samples", "1")
    assert proc.stdout.count("ok    root cause ") == sum(
        ids[0].startswith(name + "/") for ids in SAMPLES.values() if ids)


def test_every_cause_has_a_sample_ci_runs():
    assert set(SAMPLES) == {c.name for c in causes.load()}
    assert all(SAMPLES.values())


@pytest.mark.breadth
@pytest.mark.parametrize("name", sorted(scenario.available()))
def test_every_root_cause_reproduces_on_every_sampled_item(name):
    _known("--scenario", name)


def test_a_cause_whose_effect_moved_is_stale(tmp_path):
    """The destination's counters hold the old flavor in place of the new one; a cause
    that says they hold the old one *besides* the new one explains nothing."""
    text = open(causes.CAUSES_FILE).read()
    wrong = text.replace('host = "dest", counts = "old" },\n    { at = ["after-injection@*", '
                         '"verify-resize", "after-*"], host = "dest", lacks = "new" },',
                         'host = "dest", counts = "old" },')
    assert wrong != text
    path = tmp_path / "causes.toml"
    path.write_text(wrong)
    proc = cli("known", "--scenario", "hugepages-shared", "--jobs", "2",
               "--cause", "dest-counts-old-flavor", "--cause", "revert-gap-source",
               env={"NOVA_CHAOS_CAUSES": str(path)})
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "STALE root cause dest-counts-old-flavor: fail, causes bit: none" in proc.stdout
    assert "transient finding at" in proc.stdout and "memory_mb_used" in proc.stdout
    assert "ok    root cause revert-gap-source" in proc.stdout
