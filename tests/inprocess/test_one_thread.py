"""Where one thread would differ from production threads, the harness says so instead of passing.

A callee dispatched on its caller's thread that takes a lock an outer call
holds would wait in production; on one thread a re-entrant lock would let
it through silently. The guard makes it an error naming the lock.
"""
import contextlib
import threading

import pytest

from harness.cloud import one_thread


@contextlib.contextmanager
def real_lock(name, *args, **kwargs):
    yield name


def test_a_hop_taking_a_lock_an_outer_call_holds_is_a_conflict(nova):
    guard = one_thread.OneThread()
    lock = guard._guarded(real_lock)
    with lock("refresh_cache-x"):
        with lock("refresh_cache-x"):  # the same call re-entering: its own business
            pass
        with pytest.raises(one_thread.OneThreadConflict, match="lock refresh_cache-x is held by an outer call"):
            with guard.hop():
                with lock("refresh_cache-x"):
                    pass
    with guard.hop():  # once released, a hop takes it freely
        with lock("refresh_cache-x"):
            pass
    assert guard.held == {} and guard.depth == 0


def test_a_hop_gets_fresh_thread_locals_and_the_caller_gets_its_own_back(nova):
    guard = one_thread.OneThread()
    local = threading.local()
    local.stack = ["caller"]
    guard.isolate(local)
    with guard.hop():
        assert not hasattr(local, "stack")
        local.stack = ["callee"]
    assert local.stack == ["caller"]


def test_alone_names_the_other_threads():
    assert one_thread.alone() is None
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="the-other-one", daemon=True)
    thread.start()
    try:
        assert "the-other-one" in one_thread.alone()
    finally:
        stop.set()
        thread.join(5)
    assert one_thread.alone() is None
