"""Shared helpers for the project's tests."""
import os
import subprocess
import sys


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*args, env=None, timeout=600):
    """Run ``nova-chaos`` in a subprocess; returns CompletedProcess (text)."""
    full_env = dict(os.environ, PYTHONWARNINGS="ignore", **(env or {}))
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env=full_env, cwd=ROOT, timeout=timeout)


def pytest_ignore_collect(collection_path, config):
    """xdist workers must not import Nova: see tests/inprocess/conftest.py."""
    if hasattr(config, "workerinput") and "inprocess" in collection_path.parts:
        return True
    return None
