"""Prefix reuse by fork: run the scenario once, branch at every point (eventlet only).

The parent runs the scenario uninjected with the tracer on. At each wanted
point it forks one child per target; the child injects the periodic there
and simply carries on -- the parent's remaining execution continues in the
child -- to VERIFY_RESIZE, where it forks again, one grandchild per ending.
Points inside an ending (the lifecycle window) are reached by forking, at
VERIFY_RESIZE, one uninjected *ending-parent* per ending, which branches at
that ending's points the same way.
A grandchild runs its ending and every check, writes its judged result to a
file and leaves with ``os._exit``: no child ever returns into the test
runner or runs a cleanup on shared state. The parent waits with the
*unpatched* ``waitpid``/``sleep``, so none of its green threads move while
children run, and its final state must equal an uninjected run's.

What makes a forked child sound (see ../shared/notes/prefix-reuse-facts.md):
oslo.db must not drop connections made under another pid (the cloud
disables that guard: the databases are in-memory), the eventlet hub gets a
fresh epoll object in the child and its ``tpool`` runs calls inline (the
pool's OS threads are gone; libvirt calls go through it), RPC deadlines are long (Cloud sets
``rpc_response_timeout``), every child has a watchdog and the parent a kill
deadline, and ``gc.freeze()`` keeps the collector from copying the heap.

The native-threads backend cannot fork (worker threads do not survive it):
it uses fresh environments (:func:`harness.campaign.run_item`).
"""
from __future__ import annotations

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
    try:  # tpool's OS threads do not survive fork: run libvirt calls inline
        from eventlet import tpool
        tpool._nthreads = 0
    except ImportError:  # pragma: no cover
        pass
    hub = hubs.get_hub()
    if hasattr(hub, "poll") and hasattr(select, "epoll") and type(hub.poll).__name__ == "epoll":
        hub.poll = select.epoll()
        for fileno in set(hub.listeners[hub.READ]) | set(hub.listeners[hub.WRITE]):
            hub.register(fileno, new=True)


def _private_instances_path(scratch: str) -> None:
    """Give a forked child its own copy of the instance files.

    Memory is copied by fork, the filesystem is not: a child's resize
    renames the instance directory and its delete removes it, under the
    parent's and its siblings' feet.
    """
    from nova import conf
    CONF = conf.CONF
    mine = tempfile.mkdtemp(prefix=f"fs-{os.getpid()}-", dir=scratch)
    shutil.copytree(CONF.instances_path, mine, symlinks=True, dirs_exist_ok=True)
    CONF.set_override("instances_path", mine)


class Brancher:
    """Fork one child per variant, at most ``jobs`` at a time, and wait for all.

    :meth:`branch` returns the variant in the child (which carries on) and
    ``None`` in the parent once every child has exited or been killed.
    """

    def __init__(self, jobs: int, timeout: float, scratch: str | None = None):
        self.jobs, self.timeout = jobs, timeout
        self.scratch = scratch  # children copy the instance files here (parent removes it)
        self.dead: dict = {}  # variant -> why the child did not exit cleanly

    def branch(self, variants, where):
        pending, running = list(variants), {}
        try:
            return self._branch(pending, running, where)
        except BaseException:  # interrupted: leave no orphan behind
            for pid in running:
                os.kill(pid, signal.SIGKILL)
                _os.waitpid(pid, 0)
            raise

    def _branch(self, pending, running, where):
        while pending or running:
            while pending and len(running) < self.jobs:
                variant = pending.pop(0)
                pid = os.fork()
                if pid == 0:
                    self._in_child(where)
                    return variant
                running[pid] = (variant, time.monotonic())
            for pid, (variant, started) in list(running.items()):
                done, status = _os.waitpid(pid, os.WNOHANG)
                if done:
                    del running[pid]
                    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
                        self.dead[variant] = f"child exited with status {status:#x}"
                elif time.monotonic() - started > self.timeout + 30:
                    os.kill(pid, signal.SIGKILL)
                    _os.waitpid(pid, 0)
                    del running[pid]
                    self.dead[variant] = f"killed after {self.timeout + 30:.0f}s"
            if running:
                _time.sleep(0.003)
        return None

    def _in_child(self, where):
        _fresh_hub()
        if self.scratch:
            _private_instances_path(self.scratch)

        def watchdog(*_):
            raise RunTimeout(f"forked child stuck for {self.timeout:.0f}s at {where()}")
        signal.signal(signal.SIGALRM, watchdog)
        signal.alarm(int(self.timeout))


class ForkSweep:
    """Every wanted (point, target, ending) of one scenario + mutation + window, by fork."""

    def __init__(self, scen, mutation, items, traces, jobs=2, timeout=120.0,
                 window=campaign.DEFAULT_WINDOW):
        self.scen, self.mutation, self.traces = scen, mutation, traces
        self.items = {i.id: i for i in items}
        self.wanted: dict = {}
        for i in items:
            self.wanted.setdefault(i.point, {}).setdefault(i.target, []).append(i.ending)
        self.brancher = Brancher(jobs, timeout)  # scratch set once outdir exists
        self.timeout, self.window = timeout, window
        self.outdir = None
        self.on_result = None
        self.reached: set = set()   # points the parent branched at before VERIFY_RESIZE

    def _path(self, item) -> str:
        return os.path.join(self.outdir, hashlib.sha1(item.id.encode()).hexdigest() + ".json")

    def run(self, on_result=None) -> list:
        """Run the sweep; ``on_result(record)`` is called per item, point by point."""
        from harness.executor import Record
        self.on_result = on_result or (lambda r: None)
        self.outdir = tempfile.mkdtemp(prefix="nova-chaos-fork-")
        self.brancher.scratch = self.outdir
        self.records: dict = {}
        sweep = self
        run = runner.Run(self.scen, self.scen.endings[0], converge_every=False,
                         timeout=self.timeout * 20)

        class Instrument(fixtures.Fixture):
            def _setUp(self):
                if sweep.mutation:
                    self.useFixture(mutations.get(sweep.mutation)())
                sweep.injector = self.useFixture(_BranchingInjector(run, sweep))

        gc.collect()
        gc.freeze()
        try:
            parent = run.execute(lambda r: Instrument())
        finally:
            gc.unfreeze()
            shutil.rmtree(self.outdir, ignore_errors=True)
        self.parent_result = parent
        for item in self.items.values():  # points the parent never reached
            if item.id not in self.records:
                why = (f"the uninjected parent run failed: {parent.error or parent.findings[:1]}"
                       if not parent.passed else f"point {item.point} was not reached")
                self._record(Record.error(item, why))
        return [self.records[i] for i in self.items]

    def _record(self, record):
        self.records[record.item.id] = record
        self.on_result(record)

    def collect(self, items):
        """Read the results the forked children wrote for ``items``."""
        from harness.executor import Record
        for item in items:
            path = self._path(item)
            if os.path.exists(path):
                with open(path) as fh:
                    self._record(Record.from_json(json.load(fh)))
                os.unlink(path)
                continue
            why = (self.brancher.dead.get((item.target, item.ending))
                   or self.brancher.dead.get(item.target)
                   or self.brancher.dead.get(("ending", item.ending))
                   or "the forked child wrote no result")
            self._record(Record.error(item, why))

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
        run.before_ending = self._branch_ending_parents

    def _on_point(self, point):
        if self.injection is not None:          # a child: behave as a plain injector
            return super()._on_point(point)
        self.run.where = f"yield point {point.id}"
        if self.ending_parent is None:
            if self.past_verify:
                return
            self.sweep.reached.add(point.id)
        targets = sorted({i.target for i in self.sweep.items_at(point.id, self.ending_parent)})
        if not targets:
            return
        target = self.sweep.brancher.branch(targets, lambda: self.run.where)
        if target is None:                      # the parent: all branches done
            if self.ending_parent is None:
                self.sweep.collect(self.sweep.items_at(point.id))
            return
        started = time.monotonic()
        self.injection = injection.Injection(point.id, target)
        if self.ending_parent is None:          # before VERIFY_RESIZE: branch per ending there
            self.run.before_ending = lambda run: self._branch_endings(run, point, target, started)
        self.run.at_end = lambda run: self._report_and_exit(run, point, target, started)
        super()._on_point(point)                # inject here, then carry on

    def _branch_ending_parents(self, run):
        """At VERIFY_RESIZE (uninjected parent): one ending-parent per ending with points."""
        self.past_verify = True
        later = self.sweep.in_endings()
        endings = [e for e in self.sweep.scen.endings if any(i.ending == e for i in later)]
        if not endings:
            return
        ending = Brancher(1, self.sweep.timeout * 10, self.sweep.outdir).branch(
            [("ending", e) for e in endings], lambda: run.where)
        if ending is None:                      # the parent: every ending swept
            self.sweep.collect(later)
            return
        self.ending_parent = run.ending = ending[1]
        self.past_verify = False
        run.at_end = lambda run: os._exit(0)

    def _branch_endings(self, run, point, target, started):
        endings = [i.ending for i in self.sweep.items_at(point.id) if i.target == target]
        ending = self.sweep.brancher.branch([(target, e) for e in endings], lambda: run.where)
        if ending is None:                      # the target-child: its work is done
            os._exit(0)
        run.ending = ending[1]

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
            code = 0
        finally:
            os._exit(code)


def fork_supported() -> bool:
    from harness import nova_support
    return nova_support.current_backend() == "eventlet" and hasattr(os, "fork")


def sweep(items, traces_of, jobs, on_result, timeout=120.0) -> list:
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
