"""Shared helpers for the project's tests."""
import os
import subprocess
import sys


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*args, env=None, timeout=600, interpreter=False):
    """Run ``nova-chaos`` in a process of its own; returns CompletedProcess (text).

    A fork of a server that imported Nova already (:mod:`tests.forkserver`),
    unless ``interpreter`` (what a test of the process itself needs) or the
    command's environment changes what is imported.
    """
    full_env = dict(os.environ, PYTHONWARNINGS="ignore", **(env or {}))
    if not interpreter and os.environ.get("NOVA_CHAOS_TEST_FORKSERVER", "1") != "0":
        from tests import forkserver
        done = forkserver.run(args, full_env, timeout)
        if done is not None:
            return done
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env=full_env, cwd=ROOT, timeout=timeout)


def sweep(tmp_path, scenario, points, *args) -> dict:
    """``nova-chaos run scenario`` at ``points`` (fork, 2 jobs): point -> its one item's JSON.

    Every fork parent must have stayed clean and on its recorded trace.
    """
    import json
    report = tmp_path / "sweep.json"
    proc = cli("run", scenario, "--jobs", "2", "--json", str(report), *args,
               *(a for p in points for a in ("--point", p)))
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    data = json.loads(report.read_text())
    for parent in data["meta"]["fork_parents"]:
        assert parent["passed"] and parent["trace_matches"], parent
    items = {i["id"].split("/")[1]: i for i in data["items"]}
    assert len(items) == len(data["items"]), "one item per point expected"
    return items


def pytest_ignore_collect(collection_path, config):
    """xdist workers must not import Nova: see tests/inprocess/conftest.py."""
    if hasattr(config, "workerinput") and "inprocess" in collection_path.parts:
        return True
    return None


#: the tests that take a minute or more in CI (measured, `--durations`): started first, so
#: that no worker is left running one of them alone at the end (xdist hands each worker a
#: contiguous share of this order; the rest keep theirs)
LONG_FIRST = (
    "tests/test_known_entries.py::test_a_cause_per_fault_kind_reproduces",
    "tests/test_prove.py::test_the_revert_gap_fix_is_proven",
    "tests/test_inprocess.py::test_inprocess_tests_pass_in_a_subprocess[test_oracles.py]",
    "tests/test_recreate.py::test_a_shipped_recreate_test",
    "tests/test_modes.py::test_pytest_xdist_collects_and_judges_like_serial",
    "tests/test_cli.py::test_a_nova_tree_on_pythonpath",
    "tests/test_modes.py::test_fork_and_fresh_agree",
    "tests/test_mutation_scenarios.py::test_1944759_caught_exactly",
)


def pytest_collection_modifyitems(config, items):
    """Order only: what runs, and each test's verdict, do not depend on it."""
    def rank(item):
        hits = [i for i, prefix in enumerate(LONG_FIRST) if item.nodeid.startswith(prefix)]
        return hits[0] if hits else len(LONG_FIRST)
    items.sort(key=rank)  # stable: the others keep their order
