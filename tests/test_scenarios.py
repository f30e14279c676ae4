"""Every scenario in scenarios/ loads, records its yield points and passes uninjected.

A new scenario file is picked up without touching this test: it must run
clean (all checks at every phase, convergence and delete included) before
its points are worth sweeping. CI runs the first ending; ``tox -e full``
runs every ending of every scenario under injection.
"""
import pytest

from harness import scenario
from tests.conftest import cli


@pytest.mark.parametrize("name", sorted(scenario.available()))
def test_scenario_runs_clean_and_records_points(name):
    scen = scenario.load(name)
    proc = cli("baseline", name, "--ending", scen.endings[0])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-1500:]
    runs = [ln for ln in proc.stdout.splitlines() if ln.startswith(f"{name} / ")]
    assert len(runs) == 1
    for line in runs:
        assert ": PASS in " in line and "yield points in window 'resize'" in line, line
        assert int(line.split("; ")[1].split()[0]) > 20, line
