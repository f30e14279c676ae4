"""Run one scenario with one ending, checking every phase.

The run is: cloud up -> boot every server -> check -> the moves (the
subject last) -> check where the move is done and its ending not begun
(VERIFY_RESIZE; a live migration's job in flight) -> the ending -> check
-> delete every server -> check; the scenario's operation
(:mod:`harness.operations`) drives the steps. Each check reads the views
*before* any periodic runs (most accounting defects heal at the next
periodic); convergence then runs one periodic per host and requires that
nothing changes. Injection (``harness.explore.injection``) plugs in through
``instrument``, a fixture installed once the cloud is up, and may add its
own checkpoints through ``checkpoint``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
import re
import time

import fixtures

from harness.oracles import checks, views
from harness.cloud.inprocess import Cloud, deadline_guard
from harness.errors import MoveInterrupted, ScenarioFailed, UnknownChoice


@dataclasses.dataclass
class Checkpoint:
    name: str
    findings: list
    #: what the checks read, kept only when they found something: root causes
    #: (:mod:`harness.oracles.causes`) check their effect against it. Not in reports.
    evidence: object = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def passed(self) -> bool:
        return not self.findings


@dataclasses.dataclass
class RunResult:
    scenario: str
    ending: str
    checkpoints: list = dataclasses.field(default_factory=list)
    error: str | None = None
    stopped_at: str | None = None  # where the run was when it could not go on
    seconds: float = 0.0
    notes: list = dataclasses.field(default_factory=list)
    log_text: str = ""      # Nova's log after start-up: read only if the verdict needs it

    @property
    def findings(self) -> list:
        return [(cp.name, f) for cp in self.checkpoints for f in cp.findings]

    @property
    def passed(self) -> bool:
        return self.error is None and not self.findings

    def first_problem(self) -> str | None:
        """One line: where the run stopped, else its first finding; None if it passed."""
        if self.error is not None:
            return f"stopped at {self.stopped_at}: {self.error}"
        if self.findings:
            checkpoint, finding = self.findings[0]
            return f"at {checkpoint}: {finding.line()}"
        return None

    def warnings(self) -> list:
        """Nova's last warnings and errors; computed on demand (only failures keep them)."""
        return warnings_in(self.log_text)

    def missing(self, planned) -> list:
        """The planned checkpoints this run never reached, in plan order."""
        reached = {cp.name for cp in self.checkpoints}
        return [name for name in planned if name not in reached]

    def report(self) -> str:
        lines = []
        for cp in self.checkpoints:
            lines.append(f"  {cp.name}: {'ok' if cp.passed else f'{len(cp.findings)} finding(s)'}")
            lines += [f"    {f.line()}" for f in cp.findings]
        if self.error:
            lines.append(f"  error at {self.stopped_at}: {self.error}")
        return "\n".join(lines)


class Hooks:
    """The moments a run lets its instrument act, declared once (each a no-op here).

    An instrument handed to :meth:`Run.execute` that is a ``Hooks`` is
    called at them; nothing rewires a run from outside.
    """

    def before_check(self, run, name: str) -> None:
        """Before checkpoint ``name`` reads anything (tests corrupt state here)."""

    def before_ending(self, run) -> None:
        """Where the move is done and its ending not chosen yet, after its checkpoint
        (VERIFY_RESIZE; a live-migration job about to end): the fork strategy
        branches per ending here."""

    def before_deletes(self, run) -> None:
        """The ending is checked (and converged); the deletes come next."""

    def at_end(self, run) -> None:
        """On every exit path, the cloud still up (a forked child reports and leaves here)."""

    def after_crash(self, run, crash) -> None:
        """A compute died mid-step (``crash``: :class:`harness.errors.HostCrashed`);
        the steps cannot go on. The restart fault recovers here; nothing else
        kills a host, so by default the run stops."""
        raise crash


class Run:
    """State of one run, handed to its instrument."""

    recovery = None  # the checkpoints planned instead, once a host died (restart fault)

    def __init__(self, scenario, ending, converge_every=True, timeout=180.0, one_thread=False,
                 own_files=False):
        if ending not in scenario.endings:
            raise UnknownChoice(f"ending for scenario {scenario.name}", ending, scenario.endings)
        self.scenario, self.ending = scenario, ending
        self.operation = scenario.operation
        self.converge_every, self.timeout = converge_every, timeout
        self.hooks = Hooks()
        self.result = RunResult(scenario.name, ending)
        self.placed: dict = {}   # server -> host it booted on
        self.moved: dict = {}    # server -> host its move went to
        self.where = "setting up the cloud"
        self._log_offset = 0
        self._setup_log = 0  # length of the log when the cloud was up
        self.ending_error = None
        self.tracer = None
        self.chosen: dict = {}   # server -> {"current"/"old"/"new": NUMA cells}, as last seen
        self.ending_server = None  # the server whose ending runs now
        self.one_thread = one_thread  # the whole cloud on this thread (harness.cloud.one_thread): to fork
        self.own_files = own_files  # each forked process sees its own instance files at one path
        self.keep_evidence = False  # keep what every checkpoint read, not only a failing one's
        # the ending's checkpoint converges (a periodic on every host) before the deletes;
        # off, the deletes meet the state the ending left (``delete_state``: its facts)
        self.converge_ending = True
        self.delete_state: dict | None = None

    def planned(self) -> list:
        """The checkpoints every run of this scenario and ending must reach, in order.

        A run that stops short of one (Nova raised, a wait gave up, the
        process died) proved nothing past it: its item is an error, never a
        pass, whatever the checkpoints it did reach say.
        """
        if self.recovery is not None:
            return self.recovery
        return self.operation.planned(self.ending)

    # -- checking --------------------------------------------------------------
    def ledger(self, name: str):
        """The expected ledger of phase ``name`` for the hosts Nova chose."""
        moved = dict(self.moved)
        subject = self.scenario.subject.server
        if subject not in moved and self.tracer is not None and self.tracer.hosts:
            moved[subject] = self.tracer.host_of_role("dest")  # mid-move
        return self.operation.phase(self.scenario, self.placed, moved, name, self.ending_server)

    def checkpoint(self, name: str, phase, exact_cells=True, converge=None) -> Checkpoint:
        """Check every view against ``phase``; then, optionally, convergence.

        The harness's own reads and periodics are not Nova's path: no yield
        point is recorded while checking.
        """
        return self.quietly(lambda: self._checkpoint(name, phase, exact_cells, converge))

    def quietly(self, fn):
        """``fn()`` with no yield point recorded from this thread (the harness's own work)."""
        quiet = self.tracer.suspended() if self.tracer is not None else contextlib.nullcontext()
        with quiet:
            return fn()

    def _checkpoint(self, name, phase, exact_cells, converge) -> Checkpoint:
        from nova import conf
        cloud = self.cloud
        self.hooks.before_check(self, name)
        snap = views.snapshot(cloud)
        for server, numa in snap["numa"].items():
            self.chosen.setdefault(server, {}).update(
                {k: numa[k] for k in ("current", "old", "new") if numa[k] is not None})
        text = cloud.log_text()
        ctx = checks.CheckContext(cloud, phase, snap, exact_cells,
                                  conf.CONF.reserved_host_memory_mb, text[self._log_offset:],
                                  self.chosen)
        self._log_offset = len(text)
        found = checks.run_all(ctx)
        if self.ending_error is not None:
            found.insert(0, self.ending_error)
            self.ending_error = None
        after = None
        if self.converge_every if converge is None else converge:
            found_after, after = self._converge(snap)
            found += found_after
        cp = Checkpoint(name, found)
        if found or self.keep_evidence:
            cp.evidence = checks.Evidence.of(ctx, after)
        self.result.checkpoints.append(cp)
        return cp

    def _converge(self, before: dict) -> tuple:
        """A periodic on every host must change nothing and log no error:
        ``(findings, the views after the periodics)``."""
        for host in self.scenario.hosts:
            self.cloud.periodic(host.name)
        after = views.snapshot(self.cloud)
        found = [checks.Finding("convergence", f"periodic changed {path}", old, new)
                 for path, old, new in checks.diff_snapshots(before, after)]
        text = self.cloud.log_text()
        ctx = checks.CheckContext(self.cloud, None, after, False, 0,
                                  text[self._log_offset:])
        self._log_offset = len(text)
        found += [dataclasses.replace(f, check="convergence") for f in checks.logs_clean(ctx)]
        return found, after

    # -- the scenario ----------------------------------------------------------
    def execute(self, instrument=None) -> RunResult:
        """Run the scenario; whatever happens, return a result that says how far it got.

        Anything Nova (or the test stack under it) raises ends the run with
        ``result.error`` and ``result.stopped_at`` set, never a traceback:
        :meth:`planned` then names what the run did not reach.
        """
        started = time.monotonic()
        scope = fixtures.Fixture()
        scope.setUp()
        try:
            scope.useFixture(deadline_guard(self.timeout, lambda: self.where))
            from harness.execute import branching  # eventlet's patcher: only where Nova runs
            files_at = branching.PER_PROCESS if self.own_files else None
            self.cloud = scope.useFixture(Cloud(self.scenario, one_thread=self.one_thread,
                                                files_at=files_at))
            self._setup_log = len(self.cloud.log_text())  # start-up warnings are noise
            if instrument is not None:
                fixture = instrument(self)
                if isinstance(fixture, Hooks):
                    self.hooks = fixture
                scope.useFixture(fixture)
            self._steps()
        except ScenarioFailed as exc:
            self._stopped(str(exc))
        except (Exception, SystemExit) as exc:  # a Nova service exits on a failed start-up check
            self._stopped(f"{type(exc).__name__}: {_first_line(exc)}")
        finally:
            self.result.seconds = time.monotonic() - started
            if getattr(self, "cloud", None) is not None:
                self.result.log_text = self.cloud.log_text()[self._setup_log:]
            self.hooks.at_end(self)
            try:
                scope.cleanUp()
            except Exception as exc:  # a Nova that misbehaved may not tear down cleanly
                if self.result.error is None:
                    self.where = "tearing down the cloud"
                    self._stopped(f"{type(exc).__name__}: {_first_line(exc)}")
        return self.result

    def _stopped(self, why: str) -> None:
        self.result.error, self.result.stopped_at = why, self.where

    def _steps(self):
        crashed = None
        try:
            self.operation.steps(self)
        except MoveInterrupted as crash:
            crashed = crash
        if crashed is not None:  # outside the handler: nothing Nova raises now chains to it
            self.hooks.after_crash(self, crashed)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines() or [""])[0][:300]


_LEVEL = re.compile(r"^\S+ \S+ (WARNING|ERROR|CRITICAL) ")
_NUMBER = re.compile(r"\d+(\.\d+)?")


def warnings_in(log_text: str, most: int = 40) -> list:
    """The last ``most`` warnings and errors Nova logged, each with the exception under it.

    Errors inside periodics and casts are logged, not raised: a failed item
    keeps them in its report, since a run that does not reproduce on replay
    leaves nothing else to read.
    """
    lines = log_text.splitlines()
    found = [checks.with_cause(lines, i)[:300] for i, ln in enumerate(lines) if _LEVEL.match(ln)]
    # a run of one warning (a late heartbeat per service) is one line
    runs = [list(same) for _, same in itertools.groupby(found, key=_shape)]
    return [group[0] + (f" (and {len(group) - 1} more like it)" if len(group) > 1 else "")
            for group in runs[-most:]]


def _shape(line: str) -> str:
    """A log line without its timestamp and numbers."""
    return _NUMBER.sub("#", line.split(" ", 2)[2])


def run(scenario, ending, **kwargs) -> RunResult:
    instrument = kwargs.pop("instrument", None)
    return Run(scenario, ending, **kwargs).execute(instrument)
