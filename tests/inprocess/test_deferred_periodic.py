"""A periodic deferred to a lock's release runs even if the body under the lock raises.

Production's periodic blocks on the fair ``compute_resources`` lock and runs
when it is released, whatever the holder did; a deferred injection that was
dropped when the body raised would leave its item judging a periodic that
never ran.
"""
import contextlib

import pytest

from harness.explore.tracer import Tracer


@contextlib.contextmanager
def real_lock(name, *args, **kwargs):
    yield name


def test_a_deferred_periodic_runs_when_the_body_raises(nova):
    tracer = Tracer()
    lock = tracer._make_lock(real_lock)
    ran = []
    with pytest.raises(RuntimeError):
        with lock("compute_resources"):
            tracer.on_release["compute_resources"].append(lambda: ran.append(dict(tracer.held)))
            raise RuntimeError("the move failed under the lock")
    assert ran == [{}]  # it ran once, after the lock was released
    assert not tracer.on_release


def test_a_lock_never_acquired_runs_nobody_elses_periodic(nova):
    @contextlib.contextmanager
    def refused(name, *args, **kwargs):
        raise TimeoutError("lock wait gave up")
        yield  # pragma: no cover

    tracer = Tracer()
    tracer.on_release["compute_resources"].append(lambda: pytest.fail("ran too early"))
    with pytest.raises(TimeoutError):
        with tracer._make_lock(refused)("compute_resources"):
            pass
    assert tracer.on_release["compute_resources"]
