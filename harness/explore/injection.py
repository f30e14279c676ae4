"""Inject the periodic ``update_available_resource`` at one yield point.

At the point, on each target host, the periodic runs as production would
schedule it: through the same per-host ``compute_resources`` lock. If that
lock is free, the periodic runs right there, before the call the point
names (the calling green thread yields and the periodic runs to completion).
If the lock is held (the point is inside a resource-tracker critical
section), production's periodic would block on the fair lock and run as
soon as it is released: we defer it to that release -- no deadlock, no
silent skip. Then every check runs: against the operation's core ledger
inside its core (a resize: between the source's ``resize_instance`` and the
destination's ``finish_resize``; a live migration: the job in flight), where
both hosts hold their flavor; before it (the destination's claim) and after
it (inside the ending) each host must hold exactly what it holds in one of
the settled phases around the step, and placement likewise
(:class:`harness.oracles.ledger.Phase` ``between``).
"""
from __future__ import annotations

import dataclasses

import fixtures

from harness.execute.runner import Hooks
from harness import faults
from harness.explore import split
from harness.explore.tracer import DEFAULT_WINDOW, Tracer
from harness.oracles import checks, state, views


@dataclasses.dataclass
class Injection:
    point_id: str
    target: str
    fault: str = faults.DEFAULT
    detail: bool = False       # record what the periodic changed (replay)
    hosts: list = dataclasses.field(default_factory=list)     # where it must fire (at the point)
    fired_at: list = dataclasses.field(default_factory=list)  # "host (now|deferred)"
    changes: dict = dataclasses.field(default_factory=dict)   # host -> [(path, before, after)]
    state: dict = dataclasses.field(default_factory=dict)     # role -> server -> facts its periodic met


class Injector(fixtures.Fixture, Hooks):
    """A :class:`Tracer` whose hook injects at ``injection.point_id``.

    With ``injection=None`` it only records (the discovery run). A split
    injection (``fault="split"``, ``"split:N"``) stops the periodic between
    its instance and migration reads and finishes it at the operation's
    next (N-th next) yield point, before anything asks for the lock it
    holds, or before the next checkpoint, whichever comes first; its
    checkpoint is then.
    """

    def __init__(self, run, injection: Injection | None = None,
                 window: str = DEFAULT_WINDOW, fault: str | None = None,
                 mutation: str | None = None):
        super().__init__()
        self.run, self.injection = run, injection
        self.window = window
        self.mutation = mutation  # Nova broken this way first, then traced (every mode alike)
        # the fault this process (or, forking, its children) injects
        self.fault = fault or (injection.fault if injection else faults.DEFAULT)

    def _setUp(self):
        if self.mutation:
            from harness.cloud import mutations
            self.useFixture(mutations.get(self.mutation)())
        self.tracer = self.useFixture(Tracer(self.window, on_point=self._on_point,
                                             bounds=self.run.operation.bounds))
        self.run.tracer = self.tracer
        if self.run.cloud.one_thread:  # an RPC's callee starts with a stack of its own
            self.run.cloud.one_thread.isolate(self.tracer._local)
        # in every run, whatever its fault: the same wrappers, the same stacks and point ids
        self.pause_hook = self.useFixture(split.PauseHook())
        self.strike = faults.parse(self.fault).arm(self)  # what the fault does (harness.faults)
        self.addCleanup(self.strike.abandon)
        self.strike.install()

    def after_crash(self, run, crash):
        self.strike.after_crash(run, crash)

    def before_check(self, run, name):
        self.strike.before_check(name)

    def _on_point(self, point):
        self.run.where = f"yield point {point.id}"
        self.strike.on_call(point.id)
        inj = self.injection
        if inj is None or point.id != inj.point_id:
            return
        self.strike.at_point(point)

    def note_state(self, host, resumed: bool = False, allocations: bool = False) -> None:
        """What the periodic on ``host`` is about to act on (:mod:`harness.oracles.state`);
        ``resumed``: what a split periodic's second read meets, kept per server as
        ``resumed`` beside what its first read met."""
        roles = self.tracer.roles
        try:
            facts = state.at_point(self.run.cloud, host, allocations)
        except Exception as exc:  # evidence only: a read that fails must not end the item
            facts = {"unreadable": f"{type(exc).__name__}: {str(exc)[:200]}"}
        role = roles.get(host, host)
        if not resumed:
            self.injection.state[role] = facts
            return
        met = self.injection.state.setdefault(role, {})
        for server, then in facts.items():
            if isinstance(met.get(server), dict):
                met[server]["resumed"] = then

    def judged(self, host, how, before, stage):
        """The injected periodic on ``host`` is over: record it, check every view."""
        self.injection.fired_at.append(f"{host} ({how})")
        if before is not None:
            after = views.snapshot(self.run.cloud)
            self.injection.changes[host] = checks.diff_snapshots(before, after)
        phase = self.run.ledger(self.run.operation.stage_phase(stage, self.run.ending))
        self.run.checkpoint(f"after-injection@{host}", phase, exact_cells=False,
                            converge=False)
