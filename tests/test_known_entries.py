"""Every root cause still reproduces, value for value.

Its clearest items, in up to three scenarios (``scenarios/cause-samples.toml``;
the full campaign checks the rest). A Nova that stopped doing what a
cause says, or does it with another value, fails here in CI -- not only in
the hours-long full campaign.
"""
import pytest

from harness import scenario
from harness.oracles import causes
from tests.conftest import cli


@pytest.mark.parametrize("name", sorted(scenario.available()))
def test_every_root_cause_and_entry_reproduces_on_its_sampled_item(name):
    """Per scenario, so that xdist spreads them (one run of all took 12 minutes on one worker)."""
    proc = cli("known", "--scenario", name, "--jobs", "2", timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "STALE" not in proc.stdout


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
