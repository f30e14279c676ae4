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

Memoized continuations (:mod:`harness.execute.memo`, threads backend, not for
the restart fault): at the first point the top parent forks the uninjected
*baseline* and waits for it to store the rest of its run from VERIFY_RESIZE
and from each ending's checkpoint; a process reaching either in a state
met before judges its items with the stored rest instead of running it,
and every run stores its own rests for the items after it.

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
the parent runs the whole cloud on its one thread (:mod:`harness.cloud.one_thread`)
and checks before every fork that no other thread is alive (an error naming
the thread otherwise, never a hang).
"""
from __future__ import annotations

import gc
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time

from harness import scenario as scenario_mod
from harness.execute import campaign, runner
from harness.errors import EXIT_BROKEN, REASON_PREFIX, UsageError
from harness.execute.item import Item
from harness.execute.branching import HOLD_ENV, Brancher, Slots, _one_thread, _time, fork_supported
from harness.execute.record import Record
from harness.execute import memo
from harness import faults
from harness.explore import injection
from harness.oracles import known


class ForkSweep:
    """Every wanted (point, target, ending) of one scenario + mutation + window, by fork."""

    def __init__(self, scen, mutation, items, traces, jobs=2, timeout=120.0,
                 window=campaign.DEFAULT_WINDOW, fault=faults.DEFAULT, memo=True):
        self.scen, self.mutation, self.traces, self.fault = scen, mutation, traces, fault
        # memoized continuations (harness.execute.memo): the one-thread cloud's
        # state is all in view; a restart's recovery is not a fixed script
        self.memo = memo and _one_thread() and faults.parse(fault).memoizable
        self.store = None         # the continuations, once the sweep's scratch directory exists
        self.engines = None       # the cloud's SQL engines, found once by the top parent
        self.items = {i.id: i for i in items}
        self.jobs, self.timeout, self.window = jobs, timeout, window
        self.outdir = None
        self.on_result = None
        self.reached: set = set()   # points the parent branched at before VERIFY_RESIZE
        # read once here, before any fork: parsing the file per judged item cost 0.4 s each
        self.entries = [e for e in known.load() if e.covers_scenario(scen.name)]

    def parent_bound(self, n_items: int) -> float:
        """How long a process that forks ``n_items`` items may live: each may take a
        slot for ``timeout``, ``jobs`` at a time, plus its own steps."""
        return self.timeout * (2 + -(-n_items // self.jobs))

    def _path(self, item) -> str:
        return os.path.join(self.outdir, hashlib.sha1(item.id.encode()).hexdigest() + ".json")

    def run(self, on_result=None) -> list:
        """Run the sweep; ``on_result(record)`` is called per item as results arrive."""
        self.on_result = on_result or (lambda r: None)
        self.outdir = tempfile.mkdtemp(prefix="nova-chaos-fork-")
        slots = Slots(self.jobs, self.outdir)
        slots.acquire()  # this process runs the prefix
        self.brancher = Brancher(slots, self.timeout, self.outdir, limit=4 * self.jobs,
                                 on_wait=self.collect)
        if self.memo:
            self.store = memo.Store(os.path.join(self.outdir, "memo"))
        self.records: dict = {}
        # the uninjected tail takes an ending this sweep has items of: its trace is discovered
        first = next(e for e in self.scen.endings if any(i.ending == e for i in self.items.values()))
        run = runner.Run(self.scen, first, converge_every=False,
                         timeout=self.parent_bound(len(self.items)), one_thread=_one_thread(),
                         own_files=True)

        gc.collect()
        gc.freeze()
        owner, started = os.getpid(), time.monotonic()
        try:
            parent = run.execute(lambda r: _BranchingInjector(r, self))
            self.brancher.reap(block=True)
            self.collect()
        except BaseException as exc:
            if os.getpid() != owner:
                # a forked child unwinding (its watchdog fired outside its report): it must
                # not run this process's cleanup -- the outdir and slots are the top's.
                # Say where it stuck; the parent reports its items as errors.
                print(f"{REASON_PREFIX}{exc}", file=sys.stderr, flush=True)
                os._exit(EXIT_BROKEN)
            raise
        finally:
            self.brancher.kill_all()
            gc.unfreeze()
            slots.release()
            shutil.rmtree(self.outdir, ignore_errors=True)
        self.parent_result = parent
        trace = [p.id for p in run.tracer.points] if run.tracer else []
        self.parent = ({"scenario": self.scen.name, "window": self.window,
                        "mutation": self.mutation, "fault": self.fault, "passed": parent.passed,
                        "trace_matches": trace == self.traces[run.ending],
                        "why": parent.first_problem(),
                        # what the tree cost (its set-up and every item): shards' costs
                        "seconds": round(time.monotonic() - started, 1)})
        for item in self.items.values():  # no result: say why
            if item.id not in self.records:
                why = self.why_lost(item) or self.brancher.dead.get(("ending", item.ending))
                if why is None and not parent.passed:
                    why = f"the uninjected parent run failed: {self.parent['why']}"
                elif why is None:
                    why = ("a forked child wrote no result" if item.point in self.traces[item.ending]
                           else f"point {item.point} was not reached")
                self._record(Record.error(item, why))
        return [self.records[i] for i in self.items]

    def why_lost(self, item) -> str | None:
        """Why this process's brancher got no result for ``item`` (None: it knows of nothing)."""
        brancher = self.brancher
        return (brancher.refused or brancher.dead.get((item.point, item.target, item.ending))
                or brancher.dead.get((item.point, item.target)))

    def write(self, record) -> None:
        """Leave ``record`` where the top parent collects it (atomically)."""
        path = self._path(record.item)
        with open(path + ".tmp", "w") as fh:
            json.dump(record.to_json(), fh)
        os.replace(path + ".tmp", path)

    def _record(self, record):
        self.records[record.item.id] = record
        self.on_result(record)

    def collect(self):
        """Record every result a child has written so far."""
        for item in self.items.values():
            path = self._path(item)
            if item.id not in self.records and os.path.exists(path):
                with open(path) as fh:
                    self._record(Record.from_json(json.load(fh)))
                os.unlink(path)

    def items_at(self, point_id, ending=None) -> list:
        return [i for i in self.items.values()
                if i.point == point_id and (ending is None or i.ending == ending)]

    def items_at_ending(self, ending) -> list:
        return [i for i in self.items.values() if i.ending == ending]

    def in_endings(self) -> list:
        """Items whose point the parent did not reach before VERIFY_RESIZE."""
        return [i for i in self.items.values() if i.point not in self.reached]


class _BranchingInjector(injection.Injector):
    """An Injector that forks at wanted points instead of injecting in place.

    Where a process stands decides what the run's hooks do: the uninjected
    parent forks one ending-parent per ending at VERIFY_RESIZE; a process
    that injected forks its point's other endings there and, at the end,
    reports its item and leaves; an ending-parent waits for its children.
    """

    def __init__(self, run, sweep):
        super().__init__(run, None, sweep.window, sweep.fault, sweep.mutation)
        self.sweep = sweep
        self.ending_parent = None   # set in an ending-parent: the ending it runs
        self.past_verify = False    # the top parent's uninjected tail: nothing to branch
        self.held = False           # the self-test hold happened (once per sweep)
        self.injected = None        # (point, target, started): this process injected
        self.ending_chosen = False  # a target-child reached VERIFY_RESIZE and chose its ending
        self.baseline = False       # this process runs the uninjected baseline (memo): no branching
        self.marks = []             # memo.Mark: where this run's continuations to store start
        self.waited = None          # a wait for another's continuation hit its bound: why

    def before_ending(self, run):
        if self._baseline_due():  # no point before the move's checkpoint (unshelve's are all
            self._fork_baseline()  # in its ending): the baseline forks here, before the endings
        if self.baseline:
            self._baseline_endings(run)
        elif self.injected is None:
            self._branch_ending_parents(run)
        else:
            point, target, _ = self.injected
            self._branch_endings(run, point, target)

    def at_end(self, run):
        if self.baseline:  # its continuation, for every item whose state is the same
            self._store(run, "the uninjected run")
            os._exit(0)
        if self.injected is not None:
            self._report_and_exit(run, *self.injected)
        elif self.ending_parent is not None:  # wait for this ending's children, then leave
            self.sweep.brancher.reap(block=True)
            self._report_lost(self.ending_parent)
            os._exit(0)

    def _report_lost(self, ending):
        """An ending-parent's items no child reported, as errors saying why.

        Only this process knows why its children failed or why it could not
        fork; the top parent would see just a missing result.
        """
        for item in self.sweep.items_at_ending(ending):
            why = self.sweep.why_lost(item)
            if why and not os.path.exists(self.sweep._path(item)):
                self.sweep.write(Record.error(item, why))

    def _on_point(self, point):
        if self.injection is not None or self.baseline:  # a child: behave as a plain injector
            return super()._on_point(point)
        self.run.where = f"yield point {point.id}"
        if self._baseline_due():
            self._fork_baseline()
            if self.baseline:
                return
        chosen = self._branch_at(point)
        if chosen is None:                      # the parent: carry on to the next point
            self._selftest_hold()
            return
        target = chosen[1]
        self.injection = injection.Injection(point.id, target, self.sweep.fault)
        self.injected = (point, target, time.monotonic())
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

    def _store(self, run, source, inherited=None):
        """Keep this run's continuations for later items in its states (``inherited``: the
        rest it took from another), unless it stopped short (a stuck or starved run must not
        make others errors) or they are kept already."""
        store = self.sweep.store
        if store is None:
            return
        try:
            if run.result.error is not None or (inherited is not None
                                                and inherited.error is not None):
                return
            for mark in self.marks:
                if store.get(mark.key) is None:
                    store.put(mark.key, mark.joined(run, inherited, source)
                              if inherited is not None else mark.continuation(run, source))
        finally:
            store.release_all()  # stored or never will be: a waiting sibling goes on

    def before_deletes(self, run):
        """After the ending's checkpoint: an item in a state met before inherits the deletes."""
        if self.sweep.store is None or (self.injected is None and not self.baseline):
            return
        if self.baseline:
            digest = self._digest(run)
            if digest is not None:
                self.marks.append(memo.Mark.of(run, memo.key(digest, _deletes(run.ending))))
            return
        left, digest, inherited = self._inherit(run, [run.ending], f"after-{run.ending}", _deletes,
                                                wait=True)
        if not left:  # its rest from VERIFY_RESIZE: its ending, then the deletes it inherited
            self._store(run, f"item {self._item(run.ending).id}", inherited[run.ending])
            self.sweep.brancher.reap(block=True)  # this process's own children, if any
            os._exit(0)
        if digest is not None:
            self.marks.append(memo.Mark.of(run, memo.key(digest, _deletes(run.ending))))

    def _item(self, ending) -> Item:
        """This process's item with ``ending``."""
        point, target, _ = self.injected
        return Item(self.sweep.scen.name, point.id, target, ending, self.sweep.mutation,
                    self.sweep.window, self.sweep.fault)

    def _digest(self, run):
        try:
            return memo.digest(run, self.sweep.engines)
        except memo.Uncapturable:
            return None

    def _baseline_due(self) -> bool:
        """The top parent, memo on, has not forked the uninjected baseline yet."""
        return (self.sweep.memo and self.sweep.engines is None and self.ending_parent is None
                and self.injected is None and not self.baseline)

    def _fork_baseline(self):
        """At the first point (top parent): fork the uninjected run whose continuations
        items inherit, and wait for them to be stored (every item then finds them)."""
        self.sweep.engines = memo.engines()
        variant = ("baseline",)
        endings = self._endings()
        chosen = self.sweep.brancher.branch(
            [variant], lambda: self.run.where, {variant: self.sweep.parent_bound(len(endings))})
        if chosen is not None:
            self.baseline = True
            return
        self.sweep.brancher.wait_for(variant)

    def _endings(self) -> list:
        wanted = {i.ending for i in self.sweep.items.values()}
        return [e for e in self.sweep.scen.endings if e in wanted]

    def _baseline_endings(self, run):
        """At VERIFY_RESIZE (the baseline): one child per ending stores its continuation."""
        digest = self._digest(run)  # None mid-flight (a live migration's job): each ending
        chosen = self.sweep.brancher.branch([("baseline", e) for e in self._endings()],
                                            lambda: run.where)  # still stores its deletes
        if chosen is None:
            self.sweep.brancher.reap(block=True)
            os._exit(0)
        run.ending = chosen[1]
        if digest is not None:
            self.marks.append(memo.Mark.of(run, memo.key(digest, run.ending)))

    def _inherit(self, run, endings, where, rest_of=lambda ending: ending, wait=False,
                 digest=None) -> tuple:
        """At checkpoint ``where``, write the items of ``endings`` whose continuation
        (``rest_of(ending)``) is stored: ``(the endings left to run, the state's digest or
        None, {ending: the continuation it inherited})``. ``wait``: this process runs the
        endings left itself (it forks no more): wait for a continuation another process
        has claimed, and claim the others (:meth:`memo.Store.take`)."""
        inj = self.injection
        reached = {cp.name for cp in run.result.checkpoints}
        if self.sweep.store is None or not self.strike.over(reached):
            return endings, None, {}  # the injection is not over: its item runs in full
        digest = digest or self._digest(run)
        if digest is None:
            return endings, None, {}
        left, inherited = [], {}
        for ending in endings:
            key = memo.key(digest, rest_of(ending))
            if wait:  # a quarter of the item's bound: the rest may still run here after it
                continuation, why = self.sweep.store.take(key, self.sweep.timeout / 4, self._idle)
                self.waited = why or self.waited
            else:
                continuation = self.sweep.store.get(key)
            if continuation is None:
                left.append(ending)
                continue
            inherited[ending] = continuation
            record = campaign.judge(self._item(ending), memo.Inherited(run, continuation, ending),
                                    inj, self.sweep.traces, self.sweep.entries, self.injected[2])
            record.memo = f"{continuation.source}, from {where} on (key {key[:12]})"
            self.sweep.write(record)
        return left, digest, inherited

    def _branch_endings(self, run, point, target):
        """At VERIFY_RESIZE (a target-child): endings whose continuation is stored are
        judged at once; fork the other endings, run the first here."""
        endings = [i.ending for i in self.sweep.items_at(point.id) if i.target == target]
        endings, digest, _ = self._inherit(run, endings, run.operation.mid)
        if not endings:
            self.sweep.brancher.reap(block=True)
            os._exit(0)
        chosen = self.sweep.brancher.branch([(point.id, target, e) for e in endings[1:]],
                                            lambda: run.where)
        run.ending = chosen[2] if chosen is not None else endings[0]
        self.ending_chosen = True
        if digest is None:
            return
        # forked: one ending here. A sibling may have claimed its rest meanwhile: wait for it
        left, _, _ = self._inherit(run, [run.ending], run.operation.mid, wait=True, digest=digest)
        if not left:
            self.sweep.brancher.reap(block=True)
            os._exit(0)
        # its continuation, for the items that reach the same state later
        self.marks.append(memo.Mark.of(run, memo.key(digest, run.ending)))

    def _idle(self, waiting: bool):
        """Around a wait for another process's continuation: its CPU slot goes to another."""
        if waiting:
            self.sweep.brancher.slots.release()
        else:
            self.sweep.brancher.slots.acquire()

    def _report_and_exit(self, run, point, target, started):
        """Judge this process's item and leave. A target-child that stopped before
        VERIFY_RESIZE chose no ending: the run it made is every ending's item."""
        code = 3
        try:
            endings = [run.ending]
            if self.ending_parent is None and not self.ending_chosen:
                endings = [i.ending for i in self.sweep.items_at(point.id) if i.target == target]
            for ending in endings:
                run.ending = ending
                item = self._item(ending)
                record = campaign.judge(item, run, self.injection, self.sweep.traces,
                                        self.sweep.entries, started)
                record.memo = record.memo or self.waited  # reported: it ran in full, slower
                self.sweep.write(record)
                self._store(run, f"item {item.id}")
            self.sweep.brancher.reap(block=True)  # this process's own children, if any
            code = 0
        finally:
            os._exit(code)


def _deletes(ending: str) -> str:
    """The rest of an item after its ending's checkpoint: the deletes (a memo key's script)."""
    return f"deletes after {ending}"


def sweep(items, traces, jobs, backend, on_result, timeout, parents=None, memo=True) -> list:
    """Run ``items`` (any mix of scenarios/mutations/windows) by fork, one prefix per group.

    ``traces``: ``{trace_key: {ending: [point ids]}}``; ``backend`` is this
    process's (loaded already). ``parents``, a list, gets one line per
    prefix: did the uninjected parent stay clean and on its recorded trace
    while its children ran?
    """
    if not fork_supported():
        raise UsageError("--mode fork needs os.fork and /proc/self/cwd (a process's own files "
                         "at one path; not on this platform): use --mode fresh")
    out = []
    groups: dict = {}
    for item in items:
        groups.setdefault((item.scenario, item.mutation, item.window, item.fault),
                          []).append(item)
    for (name, mutation, window, fault), group in groups.items():
        scen = scenario_mod.load(name)
        one = ForkSweep(scen, mutation, group, traces[campaign.trace_key(name, window)], jobs,
                        timeout, window, fault, memo)
        out += one.run(on_result)
        if parents is not None:
            parents.append(one.parent)
    return out
