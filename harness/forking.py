"""Prefix reuse by fork: run the scenario once, branch at every point.

The parent runs the scenario uninjected with the tracer on. At each wanted
point it forks one child per target; the child injects the periodic there
and simply carries on -- the parent's remaining execution continues in the
child -- to VERIFY_RESIZE, where it forks one grandchild per ending but the
first, which it runs itself. Points inside an ending (the lifecycle window)
are reached by forking, at VERIFY_RESIZE, one uninjected *ending-parent*
per ending, which branches at that ending's points the same way. A process
that reports an item writes its judged result to a file and leaves with
``os._exit``: no child ever returns into the test runner or runs a cleanup
on shared state.

Scheduling: ``jobs`` CPU slots (lock files) are shared by the tree. Every
forked process takes a slot before doing any work; a process waiting for
its children gives its slot back meanwhile. The parent does not wait at a
point: it carries on to the next one while the children queue for slots,
so the cores stay busy through every level of the tree. Each child gets a
private copy of the instance files, made by the parent at the fork (the
filesystem, unlike memory, is not copied by fork).

What makes a forked child sound (see ../shared/notes/prefix-reuse-facts.md):
oslo.db must not drop connections made under another pid (the cloud
disables that guard: the databases are in-memory), the eventlet hub gets a
fresh epoll object in the child and its ``tpool`` runs calls inline (the
pool's OS threads are gone; libvirt calls go through it), no deadline of
Nova's runs on the wall clock (Cloud: RPC and heartbeats a week), every
child has a watchdog and the parent a kill deadline, and ``gc.freeze()`` keeps the collector from
copying the heap.

On the native-threads backend worker threads would not survive the fork:
the parent runs the whole cloud on its one thread (:mod:`harness.one_thread`)
and checks before every fork that no other thread is alive (an error naming
the thread otherwise, never a hang).
"""
from __future__ import annotations

import fcntl
import gc
import hashlib
import json
import os
import shutil
import signal
import tempfile
import time

import fixtures

from harness import campaign, injection, mutations, runner, scenario as scenario_mod
from harness.errors import RunTimeout


def _original(name):
    try:
        from eventlet import patcher
        return patcher.original(name)
    except ImportError:  # pragma: no cover - eventlet is always installed with nova
        return __import__(name)


_os, _time = _original("os"), _original("time")


def _fresh_hub():
    """Give a forked child its own epoll: the parent's is shared across fork."""
    try:
        from eventlet import hubs
        select = _original("select")
    except ImportError:  # pragma: no cover
        return
    parents = set()
    try:  # tpool's OS threads do not survive fork: run libvirt calls inline
        from eventlet import tpool
        tpool._nthreads = 0
        if tpool._rsock is not None:
            # the parent's pool signals results on this socket pair: a child
            # polling it would steal the parent's wake-ups and hang it
            parents.add(tpool._rsock.fileno())
    except ImportError:  # pragma: no cover
        pass
    hub = hubs.get_hub()
    if hasattr(hub, "poll") and hasattr(select, "epoll") and type(hub.poll).__name__ == "epoll":
        hub.poll = select.epoll()
        for fileno in set(hub.listeners[hub.READ]) | set(hub.listeners[hub.WRITE]):
            if fileno not in parents:
                hub.register(fileno, new=True)


#: test hook (tests/test_soundness.py): seconds the top fork parent holds Nova
#: still at its first branch with a resize call in flight
HOLD_ENV = "NOVA_CHAOS_SELFTEST_HOLD"

#: one line per sweep: did the uninjected parent stay clean and on its recorded
#: trace while its children ran? (its own checks ran at every phase)
PARENTS: list = []


class Slots:
    """``jobs`` CPU slots shared by a process tree: one ``flock``-ed file each.

    The kernel drops a dead process's locks, so a child that crashes or is
    killed can never leak its slot. Each process opens the files itself
    (locks belong to open file descriptions, which fork shares).
    """

    def __init__(self, jobs: int, directory: str):
        self.paths = [os.path.join(directory, f"slot{i}") for i in range(jobs)]
        for path in self.paths:
            open(path, "a").close()
        self.fd = None

    def forget(self):
        """In a new child: the inherited slot is the parent's, not ours."""
        self.fd = None

    def acquire(self):
        while True:
            for path in self.paths:
                fd = os.open(path, os.O_RDWR)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                self.fd = fd
                return
            _time.sleep(0.005)

    def release(self):
        if self.fd is None:  # a timeout struck while acquiring: nothing is held
            return
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None


def _copy_instances_path(scratch: str) -> str:
    """A private copy of the instance files, made now (the caller is paused at a point)."""
    from nova import conf
    mine = tempfile.mkdtemp(prefix="fs-", dir=scratch)
    shutil.copytree(conf.CONF.instances_path, mine, symlinks=True, dirs_exist_ok=True)
    return mine


class Brancher:
    """Fork children that queue for a shared CPU slot; reap them, now or later.

    :meth:`branch` returns the variant in the child (which carries on, holding
    a slot) and ``None`` in the parent, which carries on; :meth:`reap`
    collects exits later. ``dead`` says why a child failed.
    """

    def __init__(self, slots, timeout: float, scratch: str, limit: int):
        self.slots, self.timeout, self.scratch = slots, timeout, scratch
        self.limit = limit      # children outstanding at most (bounds memory)
        self.running: dict = {}  # pid -> (variant, deadline)
        self.dead: dict = {}     # variant -> why the child did not exit cleanly
        self.on_wait = None      # called while the top process waits (results stream on)
        self.refused = None      # why a fork was refused (Nova may swallow the exception)
        self._top = os.getpid()

    def branch(self, variants, where, lives=None):
        """``lives``: variant -> seconds it may live, for a child that is itself a parent."""
        try:
            for variant in variants:
                while len(self.running) >= self.limit:
                    self._wait_for_any()
                fs = _copy_instances_path(self.scratch)
                if _one_thread():
                    self._require_alone(where)
                pid = os.fork()
                if pid == 0:
                    self._in_child(fs, where, (lives or {}).get(variant, self.timeout))
                    return variant
                # it waits for a slot before its own bound starts: allow for the queue
                queued = (lives or {}).get(variant, self.timeout) + self.timeout * (1 + self.limit) + 30
                self.running[pid] = (variant, time.monotonic() + queued)
        except BaseException:  # interrupted: leave no orphan behind
            self.kill_all()
            raise
        return None

    def _require_alone(self, where):
        """Fork only a process whose one thread is this one: another's work would be lost mid-air."""
        from harness import one_thread
        others = one_thread.alone()
        if others is not None:
            self.refused = f"cannot fork at {where()}: other threads are alive: {others}"
            raise one_thread.OneThreadConflict(self.refused)

    def reap(self, block=False):
        """Collect exited children; with ``block``, all of them (slot given back)."""
        if block:
            self._wait(lambda: not self.running)
        else:
            self._poll()

    def _wait_for_any(self):
        before = len(self.running)
        self._wait(lambda: len(self.running) < before)

    def _wait(self, done):
        """Poll children until ``done()``, giving this process's slot back meanwhile."""
        self.slots.release()
        streamed = time.monotonic()
        try:
            while True:
                self._poll()
                if (self.on_wait is not None and os.getpid() == self._top
                        and time.monotonic() - streamed > 0.5):
                    self.on_wait()
                    streamed = time.monotonic()
                if done():
                    return
                _time.sleep(0.003)
        finally:
            self.slots.acquire()

    def _poll(self):
        for pid, (variant, deadline) in list(self.running.items()):
            done, status = _os.waitpid(pid, os.WNOHANG)
            if done:
                del self.running[pid]
                if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
                    self.dead[variant] = f"child exited with status {status:#x}"
            elif time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                _os.waitpid(pid, 0)
                del self.running[pid]
                self.dead[variant] = "killed: past its bound (its own watchdog did not end it)"

    def kill_all(self):
        for pid in self.running:
            os.kill(pid, signal.SIGKILL)
            _os.waitpid(pid, 0)
        self.running.clear()

    def _in_child(self, fs, where, life):
        from nova import conf
        self.running = {}  # the siblings are not this child's to reap
        _fresh_hub()
        conf.CONF.set_override("instances_path", fs)
        self.slots.forget()
        self.slots.acquire()

        self.rearm(life, where)

    @staticmethod
    def rearm(seconds: float, where):
        """Bound this process's remaining life (a forked child has no alarm of its own)."""
        def watchdog(*_):
            raise RunTimeout(f"forked process stuck for {seconds:.0f}s at {where()}")
        signal.signal(signal.SIGALRM, watchdog)
        signal.alarm(max(1, int(seconds)))


class ForkSweep:
    """Every wanted (point, target, ending) of one scenario + mutation + window, by fork."""

    def __init__(self, scen, mutation, items, traces, jobs=2, timeout=120.0,
                 window=campaign.DEFAULT_WINDOW):
        self.scen, self.mutation, self.traces = scen, mutation, traces
        self.items = {i.id: i for i in items}
        self.jobs, self.timeout, self.window = jobs, timeout, window
        self.outdir = None
        self.on_result = None
        self.reached: set = set()   # points the parent branched at before VERIFY_RESIZE

    def parent_bound(self, n_items: int) -> float:
        """How long a process that forks ``n_items`` items may live: each may take a
        slot for ``timeout``, ``jobs`` at a time, plus its own steps."""
        return self.timeout * (2 + -(-n_items // self.jobs))

    def _path(self, item) -> str:
        return os.path.join(self.outdir, hashlib.sha1(item.id.encode()).hexdigest() + ".json")

    def run(self, on_result=None) -> list:
        """Run the sweep; ``on_result(record)`` is called per item as results arrive."""
        from harness.executor import Record
        self.on_result = on_result or (lambda r: None)
        self.outdir = tempfile.mkdtemp(prefix="nova-chaos-fork-")
        slots = Slots(self.jobs, self.outdir)
        slots.acquire()  # this process runs the prefix
        self.brancher = Brancher(slots, self.timeout, self.outdir, limit=4 * self.jobs)
        self.brancher.on_wait = self.collect
        self.records: dict = {}
        sweep = self
        run = runner.Run(self.scen, self.scen.endings[0], converge_every=False,
                         timeout=self.parent_bound(len(self.items)))
        run.one_thread = _one_thread()

        class Instrument(fixtures.Fixture):
            def _setUp(self):
                if sweep.mutation:
                    self.useFixture(mutations.get(sweep.mutation)())
                sweep.injector = self.useFixture(_BranchingInjector(run, sweep))

        gc.collect()
        gc.freeze()
        try:
            parent = run.execute(lambda r: Instrument())
            self.brancher.reap(block=True)
            self.collect()
        finally:
            self.brancher.kill_all()
            gc.unfreeze()
            slots.release()
            shutil.rmtree(self.outdir, ignore_errors=True)
        self.parent_result = parent
        trace = [p.id for p in run.tracer.points] if run.tracer else []
        PARENTS.append({"scenario": self.scen.name, "window": self.window,
                        "mutation": self.mutation, "passed": parent.passed,
                        "trace_matches": trace == self.traces[run.ending]})
        for item in self.items.values():  # no result: say why
            if item.id not in self.records:
                why = (self.brancher.refused
                       or self.brancher.dead.get((item.point, item.target, item.ending))
                       or self.brancher.dead.get((item.point, item.target))
                       or self.brancher.dead.get(("ending", item.ending)))
                if why is None and not parent.passed:
                    why = f"the uninjected parent run failed: {parent.error or parent.findings[:1]}"
                elif why is None:
                    why = ("a forked child wrote no result" if item.point in self.traces[item.ending]
                           else f"point {item.point} was not reached")
                self._record(Record.error(item, why))
        return [self.records[i] for i in self.items]

    def _record(self, record):
        self.records[record.item.id] = record
        self.on_result(record)

    def collect(self):
        """Record every result a child has written so far."""
        from harness.executor import Record
        for item in self.items.values():
            path = self._path(item)
            if item.id not in self.records and os.path.exists(path):
                with open(path) as fh:
                    self._record(Record.from_json(json.load(fh)))
                os.unlink(path)

    def items_at(self, point_id, ending=None) -> list:
        return [i for i in self.items.values()
                if i.point == point_id and (ending is None or i.ending == ending)]

    def in_endings(self) -> list:
        """Items whose point the parent did not reach before VERIFY_RESIZE."""
        return [i for i in self.items.values() if i.point not in self.reached]


class _BranchingInjector(injection.Injector):
    """An Injector that forks at wanted points instead of injecting in place."""

    def __init__(self, run, sweep):
        super().__init__(run, None, sweep.window)
        self.sweep = sweep
        self.ending_parent = None   # set in an ending-parent: the ending it runs
        self.past_verify = False    # the top parent's uninjected tail: nothing to branch
        self.held = False           # the self-test hold happened (once per sweep)
        run.before_ending = self._branch_ending_parents

    def _on_point(self, point):
        if self.injection is not None:          # a child: behave as a plain injector
            return super()._on_point(point)
        self.run.where = f"yield point {point.id}"
        chosen = self._branch_at(point)
        if chosen is None:                      # the parent: carry on to the next point
            self._selftest_hold()
            return
        target = chosen[1]
        started = time.monotonic()
        self.injection = injection.Injection(point.id, target)
        if self.ending_parent is None:          # before VERIFY_RESIZE: branch per ending there
            self.run.before_ending = lambda run: self._branch_endings(run, point, target)
        self.run.at_end = lambda run: self._report_and_exit(run, point, target, started)
        super()._on_point(point)                # inject here, then carry on

    def _branch_at(self, point):
        """Fork one child per wanted target here: the variant in a child, None in the parent."""
        if self.ending_parent is None:
            if self.past_verify:
                return
            self.sweep.reached.add(point.id)
            self.sweep.brancher.reap()
            self.sweep.collect()                # stream results as they come
        targets = sorted({i.target for i in self.sweep.items_at(point.id, self.ending_parent)})
        if not targets:
            return
        # a target-child runs one item and forks the point's other endings
        lives = {(point.id, t): self.sweep.parent_bound(
            sum(i.target == t for i in self.sweep.items_at(point.id, self.ending_parent)))
            for t in targets}
        return self.sweep.brancher.branch(list(lives), lambda: self.run.where, lives)

    def _selftest_hold(self):
        seconds = float(os.environ.get(HOLD_ENV) or 0)
        if seconds and self.ending_parent is None and not self.held:
            self.held = True
            _time.sleep(seconds)

    def _branch_ending_parents(self, run):
        """At VERIFY_RESIZE (uninjected parent): one ending-parent per ending with points."""
        self.past_verify = True
        later = self.sweep.in_endings()
        endings = [e for e in self.sweep.scen.endings if any(i.ending == e for i in later)]
        # an ending-parent lives until its whole ending is swept, not one item's time
        lives = {("ending", e): self.sweep.parent_bound(sum(i.ending == e for i in later))
                 for e in endings}
        chosen = self.sweep.brancher.branch(list(lives), lambda: run.where, lives)
        if chosen is None:                      # the parent: its own tail is uninjected
            return
        self.ending_parent = run.ending = chosen[1]
        self.past_verify = False

        def finish(run):                        # wait for this ending's children, then leave
            self.sweep.brancher.reap(block=True)
            os._exit(0)
        run.at_end = finish

    def _branch_endings(self, run, point, target):
        """At VERIFY_RESIZE (a target-child): fork the other endings, run the first here."""
        endings = [i.ending for i in self.sweep.items_at(point.id) if i.target == target]
        chosen = self.sweep.brancher.branch([(point.id, target, e) for e in endings[1:]],
                                            lambda: run.where)
        run.ending = chosen[2] if chosen is not None else endings[0]

    def _report_and_exit(self, run, point, target, started):
        code = 3
        try:
            item = campaign.Item(self.sweep.scen.name, point.id, target, run.ending,
                                 self.sweep.mutation, self.sweep.window)
            result = campaign.judge(item, run, self.injection, self.sweep.traces, None, started)
            path = self.sweep._path(item)
            with open(path + ".tmp", "w") as fh:
                json.dump(result.to_json(), fh)
            os.replace(path + ".tmp", path)
            self.sweep.brancher.reap(block=True)  # this process's own children, if any
            code = 0
        finally:
            os._exit(code)


def fork_supported() -> bool:
    """Eventlet forks as it is; native threads with the cloud on one thread (harness.one_thread)."""
    return hasattr(os, "fork")


def _one_thread() -> bool:
    from harness import nova_support
    return nova_support.current_backend() == "threads"


def sweep(items, traces_of, jobs, on_result, timeout) -> list:
    """Run ``items`` (any mix of scenarios/mutations/windows) by fork, one prefix per group.

    ``traces_of(scenario, window)`` gives that scenario's discovered traces.
    """
    out = []
    groups: dict = {}
    for item in items:
        groups.setdefault((item.scenario, item.mutation, item.window), []).append(item)
    for (name, mutation, window), group in groups.items():
        scen = scenario_mod.load(name)
        out += ForkSweep(scen, mutation, group, traces_of(scen, window), jobs, timeout,
                         window).run(on_result)
    return out
