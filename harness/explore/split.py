"""A periodic interrupted inside itself: it stops between its two reads and finishes later.

``update_available_resource`` reads the host's instances, then its
in-progress migrations (``MigrationList.get_in_progress_and_error``),
holding the host's ``compute_resources`` lock throughout. A move that
changes both lists in between (1896463: the evacuation set the host and
dropped the migration context there, before its fix moved both under the
lock) is invisible to a periodic run whole at one point. :class:`Split`
runs the periodic in a greenlet of its own on the calling thread, stops it
just before the migration-list read, and lets the caller resume it later
(at the operation's next yield point, or before anyone asks for the lock
it holds). Where one OS thread runs the cloud (fork mode) or green threads
do (eventlet), the periodic runs in a greenlet: a fork-mode process stays
forkable. Greenlets share their thread's locals, so each switch swaps the
thread-local state that says who is running (the tracer's stack and
suspension, oslo.context's current context, the one-thread fixture's hop
depth) out and back in. With real threads (fresh mode on the threads
backend) a greenlet could be resumed only by the thread that made it, and
Nova's RPC threads move on: there the periodic gets a thread of its own
(:class:`ThreadSplit`).
"""
from __future__ import annotations

import threading

import fixtures
import greenlet

from harness.cloud.one_thread import restore_thread_state, thread_state
from harness.errors import HarnessError

#: where the periodic stops: its read of the host's in-progress migrations
PAUSE_AT = ("nova.objects.migration.MigrationList", "get_in_progress_and_error")


class Split:
    """One periodic, run by ``fn(context)``, that stops once at :data:`PAUSE_AT`.

    Its request context marks its work: on eventlet the read happens in a
    green thread the periodic spawned, not in its own greenlet, and that is
    the one to stop and resume.
    """

    def __init__(self, fn, locals_=(), one_thread=None):
        from nova import context
        self.fn, self.locals, self.one_thread = fn, list(locals_), one_thread
        self.context = context.get_admin_context()
        self.glet = greenlet.greenlet(self._body)
        self.caller = None       # who runs it now, and gets the thread back
        self.resume_into = None  # the greenlet it stopped in
        self.paused = False      # stopped at the migration-list read, not resumed yet
        self.stopped = False     # it did stop there once
        self.done = False

    def _body(self):
        try:
            self.fn(self.context)
        except Exception:  # noqa: S110 - the periodic logs its own errors, as Nova's does
            pass
        finally:
            self.done, self.paused = True, False
            self._hand_back()

    def _hand_back(self):
        """Finished: the thread goes back to whoever resumed it last."""
        self.glet.parent = self.caller  # eventlet's hub adopts a greenlet that waits on it

    def run(self) -> None:
        """Start it, or resume it; return when it stops at its pause or ends."""
        if self.done:
            return
        self.paused, self.caller = False, greenlet.getcurrent()
        target, self.resume_into = self.resume_into or self.glet, None
        saved = self._save()
        try:
            target.switch()
        finally:
            self._restore(saved)

    def pause(self) -> None:
        """Called inside the periodic: hand the thread back until :meth:`run` again."""
        self.paused = self.stopped = True
        self.resume_into = greenlet.getcurrent()
        saved = self._save()
        try:
            self.caller.switch()
        finally:
            self._restore(saved)

    def owns(self, context) -> bool:
        return getattr(context, "global_id", None) == self.context.global_id

    def runs_here(self) -> bool:
        return greenlet.getcurrent() is self.glet

    # -- the thread-local state of whoever runs --------------------------------
    def _save(self):
        depth = self.one_thread.depth if self.one_thread is not None else None
        return thread_state(self.locals), depth

    def _restore(self, saved):
        state, depth = saved
        restore_thread_state(state)
        if depth is not None:
            self.one_thread.depth = depth


class ThreadSplit(Split):
    """The same with real threads (threads backend, fresh mode), where a greenlet
    could only be resumed from the thread that made it, and Nova's RPC threads
    move on: the periodic runs on a thread of its own and waits on an event
    while stopped; any thread may resume it. Its thread-locals are its own."""

    #: seconds either side waits for the other; past it the run is stuck, as it would be
    BOUND = 300.0

    def __init__(self, fn, locals_=(), one_thread=None):
        from nova import context
        self.fn, self.context = fn, context.get_admin_context()
        self.thread = None
        self.yielded, self.go = threading.Event(), threading.Event()
        self.paused = self.stopped = self.done = False

    def _hand_back(self):
        self.yielded.set()

    def run(self) -> None:
        if self.done:
            return
        self.paused = False
        self.yielded.clear()
        if self.thread is None:
            self.thread = threading.Thread(target=self._body, name="nova-chaos-split", daemon=True)
            self.thread.start()
        else:
            self.go.set()
        if not self.yielded.wait(self.BOUND):
            raise HarnessError(f"a split periodic neither stopped nor finished in {self.BOUND:.0f}s")

    def pause(self) -> None:
        self.paused = self.stopped = True
        self.go.clear()
        self.yielded.set()
        self.go.wait(self.BOUND)  # past it: finish, rather than hold the lock for ever

    def runs_here(self) -> bool:
        return self.thread is not None and threading.get_ident() == self.thread.ident


def make(fn, locals_=(), one_thread=None) -> Split:
    """A split periodic for this process: greenlets where one thread runs the cloud
    (fork mode) or green threads do (eventlet), a real thread otherwise."""
    from harness.cloud import nova_support
    if one_thread is None and nova_support.current_backend() == "threads":
        return ThreadSplit(fn, locals_, one_thread)
    return Split(fn, locals_, one_thread)


class PauseHook(fixtures.Fixture):
    """Stop the :class:`Split` whose greenlet reaches :data:`PAUSE_AT` (once each).

    A split periodic's own pool tasks (the per-node update) run inline on
    its greenlet, as Nova's ``SpawnIsSynchronousFixture`` runs them: on the
    threads backend a pool thread could not hand the thread back (measured:
    "Cannot switch to a different thread"), and the greenlet waiting for it
    would block the thread the operation runs on.
    """

    def __init__(self):
        super().__init__()
        self.splits: list = []

    def _setUp(self):
        import importlib
        module, owner = PAUSE_AT[0].rsplit(".", 1)
        cls = getattr(importlib.import_module(module), owner)
        real = getattr(cls, PAUSE_AT[1])  # bound: the tracer's wrapper, if any, stays inside

        def read(klass, context, *args, **kwargs):
            for split in self.splits:
                if split.owns(context) and not split.stopped:
                    split.pause()
            return real(context, *args, **kwargs)
        read.remotable = getattr(real, "remotable", True)
        self.useFixture(fixtures.MonkeyPatch(".".join(PAUSE_AT), classmethod(read)))
        import futurist

        from nova import thread_pool_factory as pools
        inline = futurist.SynchronousExecutor()
        self.addCleanup(inline.shutdown)
        spawn, spawn_on = pools.spawn, pools.spawn_on

        def in_a_split() -> bool:
            return any(s.runs_here() for s in self.splits)
        self.useFixture(fixtures.MonkeyPatch(
            "nova.thread_pool_factory.spawn",
            lambda func, *a, **k: (inline.submit(func, *a, **k) if in_a_split()
                                   else spawn(func, *a, **k))))
        self.useFixture(fixtures.MonkeyPatch(
            "nova.thread_pool_factory.spawn_on",
            lambda kind, func, *a, **k: (inline.submit(func, *a, **k) if in_a_split()
                                         else spawn_on(kind, func, *a, **k))))
