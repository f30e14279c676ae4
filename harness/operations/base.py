"""What every operation shares: window boundaries, the checkpoints around the move, boots and deletes."""
from __future__ import annotations

import dataclasses

from harness.oracles.ledger import Holding, Phase

#: the stages a trace's points are in (``harness.explore.tracer.Tracer.stage``)
STAGES = ("prep", "core", "ending")


@dataclasses.dataclass(frozen=True)
class Bounds:
    """Where the subject's lifecycle is traced, as ``(ComputeManager method, role)`` pairs.

    ``opens``: on entry (the other host is the migration's); ``closes``: on
    return, the first to return closes; ``core``: entered on the first
    pair's entry, left on the second's return -- or, when that is None, when
    the run says the move is decided (a live-migration job's outcome).
    Both hosts hold the guest's flavor inside the core.
    """

    opens: tuple
    closes: tuple
    core: tuple


class Operation:
    """One kind of move. Subclasses set the class attributes and the three methods."""

    name: str = ""
    ops: tuple = ()          # the scenario step ops that are this operation
    endings: tuple = ()      # how the move can end, chosen per run
    targets: tuple = ("source", "dest", "both")  # where the periodic can be injected
    mid: str = ""            # the checkpoint where the move is done and its ending not begun
    core_phase: str = ""     # the ledger inside the core
    only_move: str = ""      # "a live migration": the only move of its scenario (""; several may be)
    bounds: Bounds = None

    def planned(self, ending: str) -> list:
        """The checkpoints a run with ``ending`` must reach, in order."""
        return ["after-boot", self.mid, f"after-{ending}", "after-delete"]

    def stage_phase(self, stage: str, ending: str) -> str:
        """The ledger an injected periodic is judged against in ``stage``."""
        return {"core": self.core_phase, "prep": "in-prep"}.get(stage, f"in-{ending}")

    def validate(self, moves, where: str, steps=()) -> str | None:
        """Why these moves (of the scenario's ``steps``) cannot be swept together (None: they can)."""
        if self.only_move and len(moves) != 1:
            return f"{where}: {self.only_move} is the only move of its scenario"
        return None

    def phase(self, scenario, placed: dict, moved: dict, name: str, stepping=None) -> Phase:
        """The ledger of phase ``name``: the settled phases every operation shares, or its own.

        ``placed``: server -> host it booted on; ``moved``: server -> host its
        move went to (from the move's checkpoint, or mid-move, on).
        """
        return (settled_phase(scenario, placed, name)
                or self.own_phase(scenario, placed, moved, name, stepping))

    def own_phase(self, scenario, placed: dict, moved: dict, name: str, stepping=None) -> Phase:
        raise NotImplementedError

    def steps(self, run) -> None:
        raise NotImplementedError


def booted(scenario) -> dict:
    """server -> the flavor it booted with."""
    return {s.server: scenario.flavors[s.flavor] for s in scenario.boots}


def unmoved(scenario, placed: dict) -> tuple:
    """What every server but the subject holds: its instance where it booted."""
    return tuple(Holding(placed[s], s, "instance", f) for s, f in booted(scenario).items()
                 if s != scenario.subject.server)


def settled_phase(scenario, placed: dict, name: str) -> Phase | None:
    """The phases every operation shares: all booted where Nova put them, or all deleted."""
    if name == "after-boot":
        return Phase(name, tuple(Holding(placed[s], s, "instance", f)
                                 for s, f in booted(scenario).items()),
                     {s: ("ACTIVE", None) for s in booted(scenario)})
    if name == "after-delete":
        return Phase(name, (), {s: ("DELETED", None) for s in booted(scenario)})
    return None


def boot_all(run) -> None:
    """Boot every server where the scenario says, then check."""
    for boot in run.scenario.boots:
        run.where = f"boot {boot.server}"
        server = run.cloud.boot(boot.server, boot.flavor, boot.host)
        run.placed[boot.server] = server["OS-EXT-SRV-ATTR:host"]
    run.checkpoint("after-boot", run.ledger("after-boot"))
    if run.tracer is not None:  # only the subject's move opens the window
        run.tracer.subject = run.cloud.servers[run.scenario.subject.server]


def ending_failed(run, server: str, exc: Exception) -> None:
    """The ending went wrong in Nova (the server in ERROR, a wait past its bound).

    That is evidence, not the end of the run: the aftermath is checked as
    after any ending, so the item fails with what Nova left behind.
    """
    from harness.oracles import checks
    run.ending_error = checks.Finding("liveness", f"{run.ending} of {server}", "success", str(exc))


def end_and_delete(run) -> None:
    """Check after the ending (then convergence), delete every server, check again.

    Without convergence at the ending (``run.converge_ending`` off: the
    uninjected run), the deletes meet the trackers as the ending left them,
    as a user's prompt delete does; the facts they meet are kept for the
    root causes that explain what the deletes leave.
    """
    run.checkpoint(f"after-{run.ending}", run.ledger(f"after-{run.ending}"),
                   converge=run.converge_ending)
    if not run.converge_ending:
        from harness.oracles import state
        run.delete_state = run.quietly(lambda: {
            h.name: state.at_point(run.cloud, h.name) for h in run.scenario.hosts})
    run.hooks.before_deletes(run)
    for boot in run.scenario.boots:
        run.where = f"delete {boot.server}"
        run.cloud.delete(boot.server)
    run.checkpoint("after-delete", run.ledger("after-delete"), converge=True)
