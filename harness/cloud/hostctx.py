"""Which compute host is the current code running for?

In production every nova-compute is its own process with its own
``CONF.host``; in-process they share one. :func:`current_host` answers from
the call stack (the nearest ComputeManager / ResourceTracker / LibvirtDriver
``self``), which also names the host role of each yield point.
:class:`HostAwareConf` gives Nova modules that read ``CONF.host`` the
answer a real per-host process would see.
"""
from __future__ import annotations

import sys

_KINDS = None
#: (module, function) a thread's work starts in: an RPC server's dispatch, a
#: looping call run as its own thread (harness.cloud.one_thread). Stack walks stop
#: there, so a callee dispatched on its caller's thread is not taken for the
#: caller (what it runs for, which Nova function calls) -- as on its own thread.
THREAD_BASES = {("oslo_messaging.rpc.server", "_process_incoming"),
                ("harness.cloud.one_thread", "as_thread")}


def thread_base(frame) -> bool:
    return (frame.f_globals.get("__name__"), frame.f_code.co_name) in THREAD_BASES


def _kinds():
    global _KINDS
    if _KINDS is None:
        from nova.compute.manager import ComputeManager
        from nova.compute.resource_tracker import ResourceTracker
        from nova.virt.libvirt.driver import LibvirtDriver
        _KINDS = (ComputeManager, ResourceTracker, LibvirtDriver)
    return _KINDS


def host_of(obj) -> str | None:
    manager, tracker, driver = _kinds()
    if isinstance(obj, (manager, tracker)):
        return obj.host
    if isinstance(obj, driver):
        conn = obj._host.get_connection()
        return getattr(conn, "hostname", None)
    return None


def current_host(frame=None, depth: int = 80) -> str | None:
    """The compute host the innermost Nova compute object on the stack serves."""
    kinds = _kinds()
    frame = frame or sys._getframe(1)
    while frame is not None and depth:
        obj = frame.f_locals.get("self")
        if obj is not None and isinstance(obj, kinds):
            return host_of(obj)
        if thread_base(frame):
            return None
        frame, depth = frame.f_back, depth - 1
    return None


class HostAwareConf:
    """A proxy of oslo.config's CONF whose ``host`` is the current compute's.

    ``groups`` (group name -> host -> option -> value) answers those options
    as that host's own config would, when its compute code reads them; any
    other code (the API, the scheduler) reads the shared value.
    """

    def __init__(self, conf, groups=None):
        object.__setattr__(self, "_conf", conf)
        object.__setattr__(self, "_groups", groups or {})

    def __getattr__(self, name):
        if name == "host":
            return current_host(sys._getframe(1)) or self._conf.host
        per_host = self._groups.get(name)
        if per_host:
            own = per_host.get(current_host(sys._getframe(1)))
            if own:
                return _GroupView(getattr(self._conf, name), own)
        return getattr(self._conf, name)


class _GroupView:
    """An oslo.config group with some options answered from ``own``."""

    def __init__(self, group, own: dict):
        self._group, self._own = group, own

    def __getattr__(self, name):
        return self._own[name] if name in self._own else getattr(self._group, name)
