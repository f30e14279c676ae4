"""What every fault answers: the questions the campaign, the runs, the judge,
known findings, the CLI and the exporters ask of the fault an item injects.

A fault is a small value parsed from its spec (the text in ids and on the
command line); the code around it asks these questions instead of which
fault it holds, so that a fault is its own module plus one line in the
registry (:mod:`harness.faults`). The defaults are the periodic's.
"""
from __future__ import annotations


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

    def reached(self, traces: dict, endings: list) -> dict:
        """``{ending: points}`` where its items of each ending strike."""
        return {e: set(traces[e]) for e in endings}

    def strikes(self, scen, point_id: str, targets) -> list:
        """The targets it can strike at a point: a periodic can run on any host."""
        return list(targets)

    def missed(self, fired_at: list, hosts: list, reached: set) -> list:
        """Texts of the missed-injection problems of an item whose point was reached:
        ``fired_at`` what fired, ``hosts`` the struck hosts, ``reached`` the checkpoints."""
        return [f"injection did not fire on {host}: its periodic was deferred to a lock "
                "release that never came" for host in hosts
                if f"after-injection@{host}" not in reached]

    def export_refusal(self) -> str | None:
        """Why ``nova-chaos export`` cannot write its items as a standalone test (None: it can)."""
        return None

    def recreate_refusal(self, scen, ending: str, endings: tuple) -> str | None:
        """Why a recreate test cannot be written of its item in ``scen`` ending in ``ending``
        (``endings``: those a recreate test has for the operation). None: it can."""
        if ending not in endings:
            return f"ending {ending}: a recreate test ends in {' or '.join(endings)}"
        return None
