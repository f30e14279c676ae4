"""What every fault answers: the questions the campaign, the runs, the judge,
known findings, the CLI and the exporters ask of the fault an item injects.

A fault is a small value parsed from its spec (the text in ids and on the
command line); the code around it asks these questions instead of which
fault it holds, so that a fault is its own module plus one line in the
registry (:mod:`harness.faults`). The defaults are the periodic's.
"""
from __future__ import annotations

from harness.errors import UsageError


def target_roles(target: str) -> tuple:
    """The host roles an item strikes: ``both`` is the source and the dest."""
    return ("source", "dest") if target == "both" else (target,)


def common_prefix(traces: list) -> list:
    """The points every trace reaches the same way before they part."""
    out = []
    for same in zip(*traces):
        if len(set(same)) > 1:
            break
        out.append(same[0])
    return out


def once_before_endings(traces: dict, endings: list) -> dict:
    """``{ending: points}`` for a fault after which no ending runs: a point every ending's
    trace reaches the same way is one item (of the first ending)."""
    shared = set(common_prefix([traces[e] for e in endings]))
    return {e: {p for p in traces[e] if p not in shared or e == endings[0]} for e in endings}


class Strike:
    """What one run's fault does, called by its injector (:class:`harness.explore.injection.Injector`).

    Armed when the injector is set up, before any point: a fork parent arms
    with its sweep's fault before anything is injected, and its children
    inherit the strike. ``injector`` is duck-typed (its tracer, run,
    injection and the helpers every fault shares: ``note_state``, ``judged``).
    """

    def __init__(self, injector):
        self.injector = injector

    def install(self) -> None:
        """Set the run up for this fault (after the tracer, before the first call)."""

    def at_point(self, point) -> None:
        """The item's point is reached, on the thread that makes its call: strike."""
        raise NotImplementedError

    def on_call(self, point_id: str) -> None:
        """Every yield point of the run, the item's own included, before it strikes."""

    def before_check(self, name: str) -> None:
        """Checkpoint ``name`` is about to read every view."""

    def after_crash(self, run, crash) -> None:
        """A host died (:class:`harness.cloud.inprocess.HostCrashed`): what follows."""

    def abandon(self) -> None:
        """The run is over, with or without the strike done: release what it holds."""

    def over(self, reached: set) -> bool:
        """Nothing of the strike is still to come (``reached``: the checkpoints so far):
        a fork parent may then inherit the rest of the run (:mod:`harness.execute.memo`)."""
        return bool(self.injector.injection.fired_at)


class Fault:
    """One fault, as its spec names it. Subclasses set what differs from the periodic."""

    #: the spec's first word, which the registry parses by
    kind = ""
    #: how known-findings entries and root causes name this kind's specs (an fnmatch glob)
    glob = ""
    #: the default fault: left out of item ids and reports
    implicit = False
    #: it runs Nova's periodic at the point (a ``*`` known entry and a cause's default
    #: fault list cover it; its causes' conditions are over the state the periodic met)
    periodic = True
    #: the struck host dies at the point: its items need the one-thread cloud (a killed
    #: thread is frozen there), fork parents cannot inherit stored continuations, and a
    #: recreate test restarts the compute instead of running its periodic
    kills = False
    #: the operations it is swept on (None: every one)
    operations: tuple | None = None
    #: a recreate test can be written of its items
    recreatable = True
    #: how a recreate test's stub of the call at the point fails it (``libvirt``: it
    #: raises libvirtError; ``lost``: its message is lost; ``reply``: its reply is);
    #: None: the fault does not fail the call (the periodic, a restart)
    fails_call: str | None = None
    #: how many of the operation's calls the periodic stays stopped inside itself (None: whole)
    pause_calls: int | None = None
    #: one line for ``--fault``'s help
    summary = ""
    #: how replay introduces the hosts it fired on
    label = "periodic injected on"

    def __init__(self, spec: str):
        self.spec = spec

    def __str__(self) -> str:
        return self.spec

    def __repr__(self) -> str:
        return f"<fault {self.spec}>"

    @property
    def one_thread(self) -> bool:
        """Its runs need the whole cloud on one thread (:mod:`harness.cloud.one_thread`)."""
        return self.kills

    @property
    def memoizable(self) -> bool:
        """Fork parents may inherit continuations stored by earlier items (:mod:`harness.execute.memo`)."""
        return not self.kills

    def check_backend(self, backend: str) -> None:
        """UsageError if it cannot run on the loaded Nova's concurrency ``backend``."""

    def refuse(self, scen) -> None:
        """UsageError if a campaign of ``scen`` cannot be swept with it."""
        if self.operations is not None and scen.operation.name not in self.operations:
            raise UsageError(f"fault {self.kind}: swept on resize, cold-migration and evacuate "
                             f"scenarios only, not {scen.name} ({scen.operation.name})")

    def reached(self, traces: dict, endings: list) -> dict:
        """``{ending: points}`` where its items of each ending strike."""
        return {e: set(traces[e]) for e in endings}

    def strikes(self, scen, point_id: str, targets) -> list:
        """The targets it can strike at a point: a periodic can run on any host."""
        return list(targets)

    @staticmethod
    def calling_host(scen, point_id: str, targets) -> list:
        """The target whose code makes the call at the point (the one host of a same-host
        scenario): where a fault that acts on the call itself strikes."""
        if scen.same_host:
            return list(targets)
        role = point_id.split(":", 1)[0]
        return [t for t in targets if t == role]

    def missed(self, fired_at: list, hosts: list, reached: set) -> list:
        """Texts of the missed-injection problems of an item whose point was reached:
        ``fired_at`` what fired, ``hosts`` the struck hosts, ``reached`` the checkpoints."""
        return [f"injection did not fire on {host}: its periodic was deferred to a lock "
                "release that never came" for host in hosts
                if f"after-injection@{host}" not in reached]

    def arm(self, injector) -> Strike:
        """This fault's :class:`Strike` for one run of ``injector``."""
        raise NotImplementedError

    def export_refusal(self) -> str | None:
        """Why ``nova-chaos export`` cannot write its items as a standalone test (None: it can)."""
        return None if self.implicit else (
            f"export supports the whole periodic only, not fault {self.spec!r}")

    def fails_at(self, point_id: str) -> str | None:
        """How a recreate test's stub fails the call at ``point_id`` (a kind of
        ``fails_call``, made exact for that call); None: it cannot say."""
        return self.fails_call

    def recreate_refusal(self, scen, ending: str, endings: tuple) -> str | None:
        """Why a recreate test cannot be written of its item in ``scen`` ending in ``ending``
        (``endings``: those a recreate test has for the operation). None: it can."""
        if not self.recreatable:
            return (f"fault {self.spec}: a recreate test covers the whole periodic, the "
                    "restart, the driver and the rpc faults so far")
        if ending not in endings:
            return f"ending {ending}: a recreate test ends in {' or '.join(endings)}"
        return None
