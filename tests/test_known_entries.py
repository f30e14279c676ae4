"""Every known-findings entry still reproduces, value for value (one sampled item each).

A Nova that stopped doing what an entry says, or does it with another
value, fails here in CI -- not only in the hours-long full campaign.
"""
import pytest

from harness import scenario
from tests.conftest import cli

ONE = """
[[finding]]
scenario = "pinned-hugepages"
points = ["dest:ComputeManager._finish_resize>Instance.save#1"]
targets = ["dest"]
endings = ["revert"]
expect = [
    {{ checkpoint = "*", check = "rt", where = "host-b vcpus_used", seen = {vcpus} }},
    {{ checkpoint = "*", check = "rt", where = "host-b memory_mb_used", seen = ["1536", "-512"] }},
    {{ checkpoint = "after-*", check = "convergence", where = "periodic changed rt host-b vcpus_used", seen = "-2 -> 0" }},
    {{ checkpoint = "after-*", check = "convergence", where = "periodic changed rt host-b memory_mb_used", seen = "-512 -> 512" }},
]
class = "transient"
reason = "destination counts the instance with its old flavor until the next periodic"
"""


@pytest.mark.parametrize("name", sorted(scenario.available()))
def test_every_known_entry_reproduces_on_its_sampled_item(name):
    """Per scenario, so that xdist spreads them (one run of all took 12 minutes on one worker)."""
    proc = cli("known", "--scenario", name, "--jobs", "2", timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "STALE" not in proc.stdout


def test_an_entry_whose_value_moved_is_stale(tmp_path):
    path = tmp_path / "known.toml"
    path.write_text(ONE.format(vcpus='["2", "-2"]'))
    assert cli("known", "--known", str(path), "--jobs", "1").returncode == 0
    path.write_text(ONE.format(vcpus='["3", "-2"]'))  # the value Nova shows is 2, not 3
    proc = cli("known", "--known", str(path), "--jobs", "1")
    assert proc.returncode == 1
    assert "STALE entry 0 (pinned-hugepages; destination counts" in proc.stdout
    assert "hard finding" not in proc.stdout
    assert "transient finding at verify-resize: [rt] host-b vcpus_used: expected 4, seen 2" in proc.stdout
