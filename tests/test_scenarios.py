"""Every scenario in scenarios/ loads, records its yield points and runs uninjected with
no finding but those of a reviewed root cause of Nova's own path (fault ``none``).

A new scenario file is picked up without touching this test: it must run
clean (all checks at every phase, convergence and delete included) before
its points are worth sweeping. ``points`` runs the same uninjected run as
``baseline`` (discovery's, cached: later tests reuse it) and exits 1 if it
fails. CI runs the first ending; ``tox -e full`` runs every ending of every
scenario under injection.
"""
import pytest

from harness import scenario
from tests.conftest import cli


@pytest.mark.parametrize("name", sorted(scenario.available()))
def test_scenario_runs_clean_and_records_points(name):
    scen = scenario.load(name)
    proc = cli("points", name, "--ending", scen.endings[0])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-1500:]
    assert "run fails" not in proc.stderr, proc.stderr[-1500:]  # known: a reviewed cause
    last = next(ln for ln in proc.stderr.strip().splitlines()
                if ln.endswith(f"yield points in window 'resize' of {name}"))
    assert int(last.split()[0]) > 20, last
