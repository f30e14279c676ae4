"""The in-process cloud on one OS thread, so that a native-threads process can fork.

After ``os.fork()`` only the forking thread exists in the child: worker
pools that count their dead workers never run submitted work again, and
locks other threads held stay locked. Repairing threads in the child is
unsound; what works is having no other thread alive at the fork. Nova's
threads in the in-process cloud, and what this fixture does with each:

* RPC servers: no listener thread, no worker pool. A message is dispatched
  on the caller's thread, straight into the server's dispatcher (with
  Nova's CastAsCall a cast already waits for its callee, so the order of
  work is the one eventlet gives). The callee runs as a *hop*: the caller's
  thread-local state (oslo.context's current context, the tracer's stack)
  is set aside for it and restored after.
* Nova's pools (scatter-gather, the periodic, builds): Nova's own
  ``SpawnIsSynchronousFixture``, each task run as a hop.
* Threads Nova starts and waits for (a stopping service's graceful
  shutdown): run inline, as a hop, when started.
* Timers: service heartbeats never start (no service can look down: the
  cloud's service_down_time is a week); the libvirt driver's wait loops
  run inline until done.
* Databases: in memory, as on eventlet (Nova's threads-mode fixtures use
  WAL files, which forked children would share).

Where one thread differs from production threading: a hop that takes a
lock an outer hop on the same thread holds would wait in production (or
deadlock); here it would re-enter silently. The fixture makes it an error
naming the lock (:class:`OneThreadConflict`), never a silent pass.
:func:`alone` is the check before every fork.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import queue
import sys
import threading
import time

import fixtures

from harness.errors import HarnessError


class OneThreadConflict(HarnessError):
    """A hop needs what an outer hop on the same thread holds: production would wait."""


def alone() -> str | None:
    """None if the calling thread is the process's only one, else which others live."""
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    if not others:
        return None
    return ", ".join(sorted(f"{t.name} ({getattr(t, '_target', None) or type(t).__name__})"
                            for t in others))


class OneThread(fixtures.Fixture):
    """Install one-thread execution; must be in place before any service starts.

    ``isolate(local)`` adds a ``threading.local`` whose state each hop gets
    fresh (the tracer's call stack).
    """

    def __init__(self):
        super().__init__()
        self.listeners: list = []   # (exchange, topic, server or None, listener), in start order
        self.depth = 0              # hops nested on the thread right now
        self.held: dict = {}        # lock name -> depth of the hop holding it
        self._locals: list = []
        self.crashable = False      # callees run on greenlets a crash can freeze (restart fault)
        self.dead: dict = {}        # host -> casts queued for its next incarnation
        self.frozen: list = []      # the dead threads: kept, never resumed, never collected
        self._threads: list = []    # (greenlet, host) of the callees running, innermost last
        self.casting = False        # the message being sent is a cast (made a call by CastAsCall)

    def isolate(self, local) -> None:
        self._locals.append(local)

    def _setUp(self):
        from nova.tests import fixtures as nova_fixtures
        from oslo_concurrency import lockutils
        from oslo_messaging._drivers import impl_fake

        self.useFixture(nova_fixtures.SpawnIsSynchronousFixture())
        from nova import thread_pool_factory as pools  # its synchronous spawns: each task a hop
        spawn, spawn_on = pools.spawn, pools.spawn_on
        self.useFixture(fixtures.MonkeyPatch(
            "nova.thread_pool_factory.spawn",
            lambda func, *args, **kwargs: spawn(self._hopping(func), *args, **kwargs)))
        self.useFixture(fixtures.MonkeyPatch(
            "nova.thread_pool_factory.spawn_on",
            lambda kind, func, *args, **kwargs: spawn_on(kind, self._hopping(func), *args,
                                                         **kwargs)))
        self.useFixture(fixtures.MonkeyPatch(
            "oslo_messaging._drivers.impl_fake.FakeDriver.listen", self._listen))
        real_send = impl_fake.FakeDriver._send
        self.useFixture(fixtures.MonkeyPatch(
            "oslo_messaging._drivers.impl_fake.FakeDriver._send",
            lambda driver, target, ctxt, message, wait_for_reply=None, timeout=None,
            transport_options=None: self._send(real_send, driver, target, ctxt, message,
                                               wait_for_reply, timeout, transport_options)))
        self.useFixture(fixtures.MonkeyPatch(
            "nova.servicegroup.drivers.db.DbDriver.join", lambda *a, **k: None))
        self.useFixture(fixtures.MonkeyPatch("nova.virt.libvirt.driver.loopingcall",
                                             _inline_loopingcall(self.hop)))
        # a stopping service runs its manager's graceful shutdown on a thread of
        # its own and waits for it, bounded (Nova 34): here it runs as a hop
        self.useFixture(fixtures.MonkeyPatch("nova.service.threading",
                                             _inline_threads(self.hop)))
        in_memory = lambda name: ("sqlite://", None)  # noqa: E731
        for module in ("nova.tests.fixtures.nova", "nova.tests.functional.fixtures"):
            # by module object: the dotted name "nova.tests.fixtures.nova" resolves to
            # the top-level nova package (the fixtures package re-exports a "nova")
            importlib.import_module(module)
            self.useFixture(fixtures.MockPatchObject(
                sys.modules[module], "_use_file_backed_sqlite_with_wal", in_memory))
        self.useFixture(fixtures.MonkeyPatch("oslo_concurrency.lockutils.lock",
                                             self._guarded(lockutils.lock)))

    # -- RPC ------------------------------------------------------------------
    def _listen(self, driver, target, batch_size, batch_timeout):
        exchange = target.exchange or driver._default_exchange
        listener = _Listener()
        self.listeners.append((exchange, target.topic, target.server, listener))
        return listener

    def _send(self, real_send, driver, target, ctxt, message, wait_for_reply, timeout,
              transport_options):
        exchange = target.exchange or driver._default_exchange
        cast, self.casting = self.casting, False
        if target.server in self.dead:  # its process is gone (harness.explore.restart)
            if wait_for_reply and not cast:  # production's caller waits out rpc_response_timeout
                import oslo_messaging
                raise oslo_messaging.MessagingTimeout(
                    f"no reply on topic {target.topic}: {target.server} is dead")
            # a cast waits in the broker's queue for the host's next incarnation
            self.dead[target.server].append(
                lambda: self._send(real_send, driver, target, ctxt, message, False, None,
                                   transport_options))
            return None
        mine = [(s, ln) for e, t, s, ln in self.listeners
                if e == exchange and t == target.topic and ln.server is not None]
        if target.fanout:
            chosen = [(s, ln) for s, ln in mine if s is not None]
        elif target.server:
            chosen = [(s, ln) for s, ln in mine if s == target.server][:1]
        else:
            chosen = mine[:1]
        if not chosen:  # nobody listens (notifications): the fake driver queues it
            return real_send(driver, target, ctxt, message, wait_for_reply, timeout,
                             transport_options)
        from oslo_messaging._drivers import impl_fake
        driver._check_serialize(message)
        reply = None
        for server, listener in chosen:
            replies = queue.Queue() if wait_for_reply else None
            incoming = impl_fake.FakeIncomingMessage(ctxt, message, replies, lambda: None)
            with self.hop():  # _process_incoming starts the callee's "thread" (hostctx)
                died = self.as_thread_of(server, listener.server._process_incoming, [incoming])
            if died and cast:  # delivered; its sender never waited
                continue
            if died:
                import oslo_messaging
                raise oslo_messaging.MessagingTimeout(
                    f"no reply on topic {target.topic}: {server} died")
            if replies is not None:
                try:
                    reply, failure = replies.get_nowait()
                except queue.Empty:
                    import oslo_messaging
                    raise oslo_messaging.MessagingTimeout(
                        f"no reply on topic {target.topic} (dispatched on the caller's thread)")
                if failure:
                    raise failure
        return reply

    def _hopping(self, func):
        """``func`` run as a hop: a pool task starts with a thread's fresh locals.

        Measured: run inline on the spawner's tracer stack, the per-node task
        of Nova's own ``update_available_resource`` (which a live migration's
        ``_post_live_migration`` calls) had its driver call hidden as nested
        in the source's ``driver.live_migration``, and the fork parent's trace
        left the one real threads record.
        """
        @functools.wraps(func)
        def hopped(*args, **kwargs):
            with self.hop():
                return func(*args, **kwargs)
        return hopped

    # -- crashes (harness.explore.restart) --------------------------------------
    def as_thread_of(self, host, fn, *args):
        """``fn(*args)`` as the work of ``host``'s thread: with :attr:`crashable`, on a
        greenlet of its own, so that :meth:`crash` can freeze it where it stands.

        A frozen callee returns nothing to its caller: a cast was delivered
        (its sender carries on, as production's would), a call gets no reply
        (:meth:`_send` makes that a MessagingTimeout).
        """
        if not self.crashable:
            fn(*args)
            return False
        import greenlet
        glet = greenlet.greenlet(lambda: (fn(*args), False)[1])
        self._threads.append((glet, host))
        try:
            return glet.switch()  # True: it died (crash)
        finally:
            self._threads.remove((glet, host))

    def mark_casts(self) -> fixtures.Fixture:
        """A fixture under which :meth:`_send` knows a cast from a call.

        Nova's CastAsCall turns every cast into a call (the caller waits for
        its callee): a callee that dies must leave a cast's sender carrying
        on, and a call's waiting in vain. Each prepared call context gets a
        ``cast`` of its own that says so before calling.
        """
        import oslo_messaging
        prepare = oslo_messaging.RPCClient.prepare

        def marked(client, *args, **kwargs):
            cctxt = prepare(client, *args, **kwargs)
            call = cctxt.call

            def cast(*a, **k):
                self.casting = True
                try:
                    return call(*a, **k)
                finally:
                    self.casting = False
            cctxt.cast = cast
            return cctxt
        return fixtures.MonkeyPatch("oslo_messaging.RPCClient.prepare", marked)

    def crash(self, host) -> None:
        """``host``'s process dies here: the thread running its code stops for good.

        Called on that thread; never returns. Its frames (and the locks they
        hold) are kept as they are: no ``finally`` of Nova's runs, as none
        would in a killed process. Messages to ``host`` wait for
        :meth:`revive`.
        """
        import greenlet
        here = greenlet.getcurrent()
        mine = [g for g, h in self._threads if g is here and h == host]
        if not mine:
            raise HarnessError(f"cannot kill {host} here: this code does not run on a thread "
                               f"of {host}'s (only an RPC callee's can be frozen)")
        self.dead.setdefault(host, [])
        self.frozen.append(here)
        here.parent.switch(True)
        raise HarnessError(f"a dead thread of {host} was resumed")  # pragma: no cover

    def bury(self) -> None:
        """Unwind the dead threads once the run is over and judged, before the cloud
        goes (a process that runs more items -- a fresh-mode worker -- must not keep
        every dead cloud, nor have the collector unwind them later, inside another item)."""
        state = thread_state(self._locals)
        while self.frozen:
            glet = self.frozen.pop()
            try:
                glet.throw()
            except BaseException:  # noqa: S110 - whatever a dead process's finally blocks say
                pass
        restore_thread_state(state)

    def revive(self, host) -> None:
        """``host`` runs again (a new incarnation listens): deliver what waited for it."""
        for send in self.dead.pop(host, []):
            send()

    @contextlib.contextmanager
    def hop(self):
        """Run the block as another thread would: fresh thread-locals, the caller's restored after."""
        state = thread_state(self._locals)
        for local in self._locals:
            local.__dict__.clear()
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            restore_thread_state(state)

    # -- locks ----------------------------------------------------------------
    def _guarded(self, real_lock):
        from harness.explore.tracer import PER_HOST_LOCKS, current_host

        @contextlib.contextmanager
        def lock(name, *args, **kwargs):
            host = current_host(sys._getframe(1))
            key = f"{name}@{host}" if name in PER_HOST_LOCKS and host else name
            outer = self.held.get(key)
            if outer is not None and outer < self.depth:
                raise OneThreadConflict(
                    f"lock {key} is held by an outer call on this thread (hop {outer}, now "
                    f"{self.depth}): production threads would wait for it here")
            with real_lock(name, *args, **kwargs) as held:
                fresh = outer is None
                if fresh:
                    self.held[key] = self.depth
                try:
                    yield held
                finally:
                    if fresh:
                        self.held.pop(key, None)
        return lock


def thread_state(locals_) -> tuple:
    """What says who runs on this thread: ``locals_``' contents and oslo.context's current context."""
    from oslo_context import context as oslo_context
    return [(local, dict(local.__dict__)) for local in locals_], oslo_context.get_current()


def restore_thread_state(state) -> None:
    """Put back what :func:`thread_state` saved."""
    from oslo_context import context as oslo_context
    saved, current = state
    for local, values in saved:
        local.__dict__.clear()
        local.__dict__.update(values)
    if current is not None:
        current.update_store()
    else:  # oslo.context has no public "clear"; its store is a thread local
        with contextlib.suppress(AttributeError):
            del oslo_context._request_store.context


class _Listener:
    """Stands in for the fake driver's polling listener: no thread, just the server's entry."""

    def __init__(self):
        self.server = None

    def start(self, on_incoming):
        self.server = on_incoming.__self__  # the RPC server whose dispatcher runs messages

    def stop(self):
        self.server = None

    def cleanup(self):
        pass


def as_thread(fn, *args, **kwargs):
    """Run ``fn`` as the body of a thread of its own (stack walks stop here: hostctx)."""
    return fn(*args, **kwargs)


def _inline_loopingcall(hop):
    """oslo.service's loopingcall module as the libvirt driver sees it, its fixed-interval loop inline.

    Each loop runs as a hop, as it would on the thread oslo.service gives it.
    """
    import types

    from oslo_service import loopingcall

    class InlineLoopingCall:
        """Runs ``f`` until it raises LoopingCallDone, on the caller's thread, when started."""

        def __init__(self, f=None, *args, **kwargs):
            self.f, self.args, self.kwargs = f, args, kwargs
            self._result = self._error = None

        def start(self, interval, initial_delay=None, stop_on_exception=True):
            with hop():
                return as_thread(self._loop, interval, initial_delay, stop_on_exception)

        def _loop(self, interval, initial_delay, stop_on_exception):
            if initial_delay:
                time.sleep(initial_delay)
            while True:
                try:
                    self.f(*self.args, **self.kwargs)
                except loopingcall.LoopingCallDone as done:
                    self._result = done.retvalue
                    return self
                except Exception as exc:
                    if stop_on_exception:
                        self._error = exc
                        return self
                time.sleep(interval)

        def wait(self):
            if self._error is not None:
                raise self._error
            return self._result

        def stop(self):
            pass

    names = {k: getattr(loopingcall, k) for k in dir(loopingcall) if not k.startswith("__")}
    return types.SimpleNamespace(**dict(names, FixedIntervalLoopingCall=InlineLoopingCall))


def _inline_threads(hop):
    """The threading module as a module that starts threads and waits for them sees it:
    a thread's target runs inline, as a hop, when it is started."""
    import types

    class InlineThread:
        daemon = False

        def __init__(self, group=None, target=None, name=None, args=(), kwargs=None, **_):
            self._target, self._args, self._kwargs = target, args, kwargs or {}

        def start(self):
            if self._target is not None:
                with hop():
                    as_thread(self._target, *self._args, **self._kwargs)

        def join(self, timeout=None):
            pass

        def is_alive(self):
            return False

    names = {k: getattr(threading, k) for k in dir(threading) if not k.startswith("__")}
    return types.SimpleNamespace(**dict(names, Thread=InlineThread))
