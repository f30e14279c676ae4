"""Record yield points inside a window, name them stably, and hand each to a hook.

The :class:`Tracer` fixture wraps every attribute :mod:`harness.explore.yieldpoints`
lists, plus ``lockutils.lock`` and the window's boundary methods, and
restores them all on cleanup. Inside the window each qualifying call becomes
a :class:`Point` whose id reads
``<role>:<Nova function making the call>><callee>#<occurrence>``, e.g.
``source:ComputeManager._resize_instance>Instance.save#2``. Ids hold no
uuid, address or time, so they are identical across runs, processes,
xdist workers and backends as long as Nova's execution is.

Roles are per host, found from the call stack (:mod:`harness.cloud.hostctx`), not
from "is resize_instance on the stack": with CastAsCall the destination's
``finish_resize`` runs on its own green thread while the source waits.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import os
import re
import sys
import threading

import fixtures

from harness.explore import yieldpoints
from harness.cloud.hostctx import current_host, thread_base
from harness.operations.base import STAGES

#: locks that are per compute process in production but shared in-process
PER_HOST_LOCKS = ("compute_resources",)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: decorator frames that say nothing about where a call is made
_GENERIC = {"inner", "wrapper", "wrapped", "decorated_function", "__call__", "_wrapper",
            "wrapped_func", "f", "__enter__", "__exit__", "<lambda>", "synchronized_inner",
            "_inner", "outer", "wrap", "_decorator", "decorator"}


@dataclasses.dataclass(frozen=True)
class Point:
    id: str
    role: str
    function: str
    callee: str
    occurrence: int
    kind: str
    stage: str = "core"  # "prep" before the operation's core, "ending" after it


@dataclasses.dataclass(frozen=True)
class Window:
    """Which stages of the subject's move are recorded.

    The tracer always follows the operation's lifecycle (its
    :class:`harness.operations.Bounds`); a window records the points of its
    ``stages`` (:meth:`Tracer.stage`), counting occurrences over them
    only, so a narrower window's trace is a slice of a wider one's
    (:func:`narrowed`). ``per_ending``: the window reaches into the ending,
    so each ending has its own trace.
    """

    name: str
    stages: tuple = STAGES
    per_ending: bool = False


#: the design card's window: what runs when no window is named
DEFAULT_WINDOW = "resize"
WINDOWS = {
    # the design card's: the operation's core, where both hosts hold the flavor
    # (a resize: the source starts sending, until the destination has it;
    # a live migration: the source runs the job, until its outcome)
    "resize": Window("resize", ("core",)),
    # the whole lifecycle: the destination's claim, through the ending's last step
    "lifecycle": Window("lifecycle", STAGES, per_ending=True),
}
#: the window every other is a slice of: what discovery records
WIDEST = "lifecycle"


def narrowed(points, window: str) -> list:
    """The ids ``window`` gives the calls of ``points`` (``(id, stage)`` pairs
    recorded in :data:`WIDEST`) that lie in its stages.

    Occurrence counters restart where a window opens, so they are counted
    again over the slice: exactly what a tracer opened on ``window`` records
    (its boundaries are the stages'; a fork parent's trace is compared with
    this one, so a difference is an error, never a silent skip).
    """
    stages = WINDOWS[window].stages
    counts: collections.Counter = collections.Counter()
    ids = []
    for point_id, stage in points:
        if stage in stages:
            bare = point_id.rsplit("#", 1)[0]
            counts[bare] += 1
            ids.append(f"{bare}#{counts[bare]}")
    return ids


#: global request ids whose work the tracer does not record (the harness's own periodics)
_QUIET_REQUESTS: set = set()


@contextlib.contextmanager
def quiet_context(context):
    """Make ``context`` current for the block, its request unrecorded; then restore.

    Suspending the calling thread is not enough for the harness's own
    periodics: Nova 34 runs ``update_available_resource`` per node in a pool
    thread, which inherits the spawner's current context but not its thread
    locals (measured: a checkpoint's convergence periodics added 29 points to
    a lifecycle trace and shifted later occurrence numbers). The global
    request id marks the work: conductor calls make a copy of the context
    current, and the copy keeps it.
    """
    from oslo_context import context as oslo_context
    previous = oslo_context.get_current()
    _QUIET_REQUESTS.add(context.global_id)
    context.update_store()
    try:
        yield context
    finally:
        _QUIET_REQUESTS.discard(context.global_id)
        if previous is not None:
            previous.update_store()
        else:  # oslo.context has no public "clear"; its store is a thread local
            try:
                del oslo_context._request_store.context
            except AttributeError:
                pass


def in_quiet_context(frame) -> bool:
    """Whether the call at ``frame`` is work of a quiet request.

    The current context says so until the in-process placement makes its own
    current (it does not carry the global id on); the ``context`` argument of
    a caller up the stack (``_update_available_resource_for_node``'s, in the
    pool thread) says so throughout.
    """
    if not _QUIET_REQUESTS:
        return False
    from oslo_context import context as oslo_context
    if getattr(oslo_context.get_current(), "global_id", None) in _QUIET_REQUESTS:
        return True
    while frame is not None:
        if getattr(frame.f_locals.get("context"), "global_id", None) in _QUIET_REQUESTS:
            return True
        frame = frame.f_back
    return False


class Tracer(fixtures.Fixture):
    """Instrument Nova at run time; record points; call ``on_point`` at each.

    ``on_point(point)`` runs *before* the call it names, in the thread making
    it, with recording suspended for that thread (so an injected periodic or
    a check adds no points of its own).
    """

    def __init__(self, window: str = DEFAULT_WINDOW, on_point=None, bounds=None):
        super().__init__()
        from harness.operations import RESIZE
        self.window = WINDOWS[window]
        self.bounds = bounds or RESIZE.bounds  # the subject's operation's
        self.on_point = on_point
        self.call_args = None  # (args, kwargs) of the call a point names, while on_point runs
        self.points: list[Point] = []
        self.subject = None            # instance uuid whose move is traced (None: the first)
        self.roles: dict = {}          # host -> role (one host: "source" only)
        self.hosts: dict = {}          # role -> host
        self.open = False
        self.closed = False
        self.core = False              # inside the core: both hosts hold their flavor
        self.past_core = False         # the core has closed: the ending's steps are next
        self.held: dict = {}           # lock name -> thread ident holding it
        self.on_release: dict = collections.defaultdict(list)  # lock name -> callbacks
        self.before_acquire: dict = {}  # lock name -> callback, run (once) before it is asked for
        self._counts = collections.Counter()
        self._local = threading.local()
        self.incarnations: dict | None = None  # host -> restarts so far (restart fault: locks per process)

    # -- instrumentation -------------------------------------------------------
    def _setUp(self):
        import nova
        from nova.compute import manager
        from nova.virt.libvirt.driver import LibvirtDriver
        from oslo_concurrency import lockutils
        self._nova_dir = os.path.dirname(os.path.abspath(nova.__file__)) + os.sep
        self._tests_dir = os.path.join(self._nova_dir, "tests") + os.sep
        for kind, owner, attr, label in yieldpoints.all_targets(LibvirtDriver):
            self._wrap(owner, attr, self._make(kind, label))
        self._wrap(lockutils, "lock", self._make_lock)
        bounds = self.bounds
        boundaries = {m for m, _ in (bounds.opens, *bounds.closes, *filter(None, bounds.core))}
        for method in sorted(boundaries):
            self._wrap(manager.ComputeManager, method, self._make_boundary(method))

    def _wrap(self, owner, attr, factory):
        raw = inspect_raw(owner, attr)
        if isinstance(raw, classmethod):
            new = classmethod(factory(raw.__func__))
        elif isinstance(raw, staticmethod):
            new = staticmethod(factory(raw.__func__))
        else:
            new = factory(getattr(owner, attr))
        own = attr in vars(owner)
        setattr(owner, attr, new)
        if own:
            self.addCleanup(setattr, owner, attr, raw)
        else:
            self.addCleanup(delattr, owner, attr)

    def _make(self, kind, label):
        def factory(fn):
            @functools.wraps(fn)
            def traced(*args, **kwargs):
                if not self.open:
                    return fn(*args, **kwargs)
                return self.call(kind, label, fn, args, kwargs, sys._getframe(1))
            return traced
        return factory

    def _make_lock(self, real_lock):
        tracer = self

        @contextlib.contextmanager
        def lock(name, *args, **kwargs):
            frame = sys._getframe(1)
            host = current_host(frame)
            label = f"lock.{_UUID.sub('<uuid>', name.split('@')[0])}"
            if name in PER_HOST_LOCKS and host:
                name = f"{name}@{host}"  # one nova-compute process per host
            if tracer.incarnations is not None and host:
                # every lock is its process's: a new incarnation of a host (or another
                # host) never waits for a lock a dead one's frozen thread holds
                name = f"{name}#{host}.{tracer.incarnations.get(host, 0)}"
            if tracer.open:
                tracer.call("lock", label, lambda: None, (), {}, frame)
            first = tracer.before_acquire.pop(name, None)
            if first is not None:  # a periodic paused holding it finishes first
                first()
            acquired = False
            try:
                with real_lock(name, *args, **kwargs) as held:
                    acquired = True
                    tracer.held[name] = threading.get_ident()
                    try:
                        yield held
                    finally:
                        tracer.held.pop(name, None)
            finally:  # a periodic waiting on the lock runs at release, whatever the body did
                for callback in tracer.on_release.pop(name, ()) if acquired else ():
                    callback()
        return lock

    def _make_boundary(self, method):
        def factory(fn):
            @functools.wraps(fn)
            def boundary(manager_self, context, *args, **kwargs):
                instance = kwargs.get("instance") or next(  # private methods take it by position
                    (a for a in args if type(a).__name__ == "Instance"), None)
                # a method of no instance (the source's init_host) is the subject's too
                ours = self.subject in (None, getattr(instance, "uuid", self.subject))
                if ours:
                    self._enter(method, manager_self.host, instance, kwargs.get("migration"))
                try:
                    return fn(manager_self, context, *args, **kwargs)
                finally:
                    if ours:
                        self._exit(method, manager_self.host)
            return boundary
        return factory

    def _is(self, host, role) -> bool:
        return self.hosts.get(role) == host

    def _enter(self, method, host, instance, migration):
        opener, role = self.bounds.opens
        if method == opener and not self.open and not self.closed:
            # the opener's own host is its role's (prep_resize: dest_compute is not set yet)
            if role == "dest":
                source, dest = getattr(migration, "source_compute", None) or instance.host, host
            else:
                source, dest = host, migration.dest_compute
            self.hosts = {"source": source, "dest": dest}
            # one host: "source"; no source host (an unshelve): the destination only
            self.roles = {h: r for h, r in ((dest, "dest"), (source, "source")) if h is not None}
            self.open = True
        start = self.bounds.core[0]
        if method == start[0] and self._is(host, start[1]) and not self.past_core:
            self.core = True

    def _exit(self, method, host):
        end = self.bounds.core[1]
        if end is not None and method == end[0] and self._is(host, end[1]) and self.core:
            self.decide()
        if self.open and any(m == method and self._is(host, r) for m, r in self.bounds.closes):
            self.open, self.closed = False, True

    def decide(self):
        """The core is over: the move's outcome is decided (its ending's steps follow)."""
        self.core, self.past_core = False, True

    # -- recording -------------------------------------------------------------
    def _stack(self) -> list:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    @contextlib.contextmanager
    def suspended(self):
        """No points are recorded from this thread inside the block."""
        self._local.suspended = getattr(self._local, "suspended", 0) + 1
        try:
            yield
        finally:
            self._local.suspended -= 1

    def _quiet(self, caller) -> bool:
        return bool(getattr(self._local, "suspended", 0)) or in_quiet_context(caller)

    def call(self, kind, label, fn, args, kwargs, caller):
        stack = self._stack()
        host = current_host(caller)
        role = self.roles.get(host)
        if role is not None and self.stage() in self.window.stages and not self._quiet(caller):
            enclosing = next((k for k, h in reversed(stack) if h == host), None)
            if enclosing not in yieldpoints.OPAQUE and enclosing != kind:
                label = yieldpoints.label_detail(kind, label, args, kwargs)
                function = self._function(caller)
                key = (role, function, label)
                self._counts[key] += 1
                n = self._counts[key]
                point = Point(f"{role}:{function}>{label}#{n}", role, function, label, n, kind,
                              self.stage())
                self.points.append(point)
                if self.on_point is not None:
                    self.call_args = (args, kwargs)  # what the call is about to be given
                    with self.suspended():
                        self.on_point(point)
                    self.call_args = None
        stack.append((kind, host))
        try:
            return fn(*args, **kwargs)
        finally:
            stack.pop()

    def staged(self) -> list:
        """``[(point id, stage)]`` of the recorded points: what discovery caches."""
        return [(p.id, p.stage) for p in self.points]

    def stage(self) -> str:
        """Where the subject's move is: "prep", "core" or "ending"."""
        return "core" if self.core else "ending" if self.past_core else "prep"

    def _function(self, frame) -> str:
        """The innermost Nova (non-test, non-decorator) function on the stack."""
        while frame is not None:
            path = frame.f_code.co_filename
            if (path.startswith(self._nova_dir) and not path.startswith(self._tests_dir)
                    and frame.f_code.co_name not in _GENERIC):
                return frame.f_code.co_qualname.replace(".<locals>", "")
            if thread_base(frame):
                break
            frame = frame.f_back
        return "?"

    def host_of_role(self, role: str) -> str:
        return self.hosts[role]


def inspect_raw(owner, attr):
    """The attribute as stored (classmethod/staticmethod objects intact)."""
    for klass in getattr(owner, "__mro__", (owner,)):
        if attr in vars(klass):
            return vars(klass)[attr]
    return getattr(owner, attr)
