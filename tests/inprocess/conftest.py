"""Tests that import Nova into the pytest process itself.

Nova's eventlet monkey patching hangs pytest-xdist workers (their execnet
channel threads predate the patching), so under ``-n`` these are not
collected by the workers: ``tests/test_inprocess.py`` runs this folder in
one plain pytest subprocess instead. Without ``-n`` they run directly.
"""
import pytest


@pytest.fixture(scope="session")
def nova():
    from harness.cloud import nova_support
    return nova_support.load_nova()
