"""Nova's clocks stand still while the harness works or waits (eventlet backend).

Everything the harness does between two of Nova's steps -- forking a child
and copying its files at a point, waiting for children or for a CPU slot,
reading views and judging at a checkpoint -- happens while Nova is frozen
mid-call: an RPC reply wait (``rpc_response_timeout``), a heartbeat or any
other eventlet timer would otherwise expire after as much wall time as the
campaign's size, the machine's load and ``--jobs`` allow. Measured: 150 of
387 bystander items ended in MessagingTimeout at ``--jobs 1``, and under
``pytest -n auto`` a fork parent's own branching work (unheld) expired
Nova's 60 s deadline. On leaving :func:`held`, every pending hub timer moves
later by the time spent inside, so to Nova no time passed.

Nested blocks shift once (the outermost); a child forked inside a block
inherits it and shifts by the time since its parent entered. On the
native-threads backend nothing is held (there is no hub; nothing forks).
"""
from __future__ import annotations

import contextlib

_depth = 0


def _monotonic():
    try:
        from eventlet import patcher
        return patcher.original("time").monotonic()
    except ImportError:  # pragma: no cover - eventlet is always installed with nova
        import time
        return time.monotonic()


@contextlib.contextmanager
def held():
    global _depth
    started = _monotonic()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            _shift_timers(_monotonic() - started)


def _shift_timers(seconds: float) -> None:
    """Move every pending eventlet timer ``seconds`` later, in place.

    The shift is uniform, so the timer heap stays a heap; the lists are
    edited in place because the hub may hold them in a local.
    """
    from harness import nova_support
    if nova_support.current_backend() != "eventlet":
        return
    from eventlet import hubs
    hub = hubs.get_hub()
    for timers in (hub.timers, hub.next_timers):
        timers[:] = [(when + seconds, timer) for when, timer in timers]
