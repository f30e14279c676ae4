"""Every root cause still reproduces, value for value.

CI: each cause's clearest item (the first of its samples in
``scenarios/cause-samples.toml``). ``tox -e breadth``: all of them, up to
three scenarios per cause (the full campaign checks the rest). A Nova that
stopped doing what a cause says, or does it with another value, fails here
in CI -- not only in the hours-long full campaign.
"""
import os

import pytest

from harness import scenario
from harness.front import by_cause
from harness.oracles import causes
from tests.conftest import cli

SAMPLES = by_cause.load_samples(os.path.join(scenario.SCENARIO_DIR, by_cause.SAMPLES_FILE))
#: the scenarios holding some cause's first sample
FIRST = sorted({ids[0].split("/")[0] for ids in SAMPLES.values() if ids})


def _reproduces(name, *extra):
    proc = cli("known", "--scenario", name, "--jobs", "2", *extra, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "STALE" not in proc.stdout
    return proc


@pytest.mark.parametrize("name", FIRST)
def test_every_root_cause_reproduces_on_its_clearest_item(name):
    """Per scenario, so that xdist spreads them (one run of all took 12 minutes on one worker)."""
    proc = _reproduces(name, "--samples", "1")
    assert proc.stdout.count("ok    root cause ") == sum(
        ids[0].startswith(name + "/") for ids in SAMPLES.values() if ids)


def test_every_cause_has_a_sample_ci_runs():
    assert set(SAMPLES) == {c.name for c in causes.load()}
    assert all(SAMPLES.values())


@pytest.mark.breadth
@pytest.mark.parametrize("name", sorted(scenario.available()))
def test_every_root_cause_reproduces_on_every_sampled_item(name):
    _reproduces(name)


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
               env={"NOVA_CHAOS_CAUSES": str(path)})
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "STALE root cause dest-counts-old-flavor: fail, causes bit: none" in proc.stdout
    assert "transient finding at" in proc.stdout and "memory_mb_used" in proc.stdout
    assert "ok    root cause revert-gap-source" in proc.stdout
