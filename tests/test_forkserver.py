"""The tests' fork server answers as a new interpreter would, and is really used."""
import os
import subprocess
import sys

from tests import forkserver
from tests.conftest import ROOT


def _interpreter(*args, env):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)


def _env(**extra):
    return dict(os.environ, PYTHONWARNINGS="ignore", **extra)


def test_a_fork_answers_as_an_interpreter_does():
    for args in (["scenarios"], ["run", "pinned-hugepages", "--window", "sideways"],
                 ["mutations"]):
        forked = forkserver.run(args, _env(), 300)
        assert forked is not None, "the fork server did not start: every command pays the imports"
        fresh = _interpreter(*args, env=_env())
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            fresh.returncode, fresh.stdout, fresh.stderr), args


def test_an_environment_that_changes_imports_gets_an_interpreter():
    assert forkserver.run(["scenarios"], _env(PYTHONPATH="/elsewhere"), 60) is None
    assert forkserver.run(["scenarios"], _env(NOVA_CHAOS_CACHE="/elsewhere"), 60) is None
    # prove and recreate give Nova's tests the environment they started with
    assert forkserver.run(["prove", "--help"], _env(), 60) is None


def test_a_command_past_its_bound_is_killed_as_subprocess_run_does():
    import pytest
    with pytest.raises(subprocess.TimeoutExpired):
        forkserver.run(["baseline", "pinned-hugepages"], _env(), 0.5)
