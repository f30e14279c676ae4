"""Resize and cold migration: the move stops at VERIFY_RESIZE; confirm, revert or auto-confirm end it.

Several servers may be moved (each once); the last move is the subject, the
others are in flight around it. Nova runs a cold migration through the
resize machinery with the old flavor as the new.
"""
from __future__ import annotations

from harness.errors import ScenarioFailed
from harness.operations.base import (Bounds, Operation, boot_all, booted, end_and_delete,
                                      ending_failed)
from harness.oracles.ledger import Holding, Phase

ENDING_OUTCOME = {"confirm": ("confirm", "confirmed"), "auto-confirm": ("confirm", "confirmed"),
                  "revert": ("revert", "reverted")}


class Resize(Operation):
    name = "resize"
    ops = ("resize", "migrate")
    endings = ("confirm", "revert", "auto-confirm")
    mid = "verify-resize"
    core_phase = "in-resize"
    # the destination's claim, through the ending's last step; the core: the
    # source starts sending, until the destination has it (the design card's window)
    bounds = Bounds(opens=("prep_resize", "dest"),
                    closes=(("confirm_resize", "source"), ("finish_revert_resize", "source")),
                    core=(("resize_instance", "source"), ("finish_resize", "dest")))

    def steps(self, run) -> None:
        cloud, scen = run.cloud, run.scenario
        boot_all(run)
        for move in scen.moves:
            run.where = f"{move.op} {move.server}"
            server = (cloud.resize(move.server, move.flavor) if move.op == "resize"
                      else cloud.migrate(move.server, move.host))
            run.moved[move.server] = server["OS-EXT-SRV-ATTR:host"]
        run.checkpoint(self.mid, run.ledger(self.mid))
        run.hooks.before_ending(run)
        for move in scen.moves:
            run.where = f"{run.ending} {move.server}"
            run.ending_server = move.server
            try:
                getattr(cloud, run.ending.replace("-", "_"))(move.server)
            except ScenarioFailed as exc:
                ending_failed(run, move.server, exc)
        end_and_delete(run)

    def own_phase(self, scenario, placed, moved, name, stepping=None) -> Phase:
        """``stepping``: inside the endings, the server whose ending runs now
        (the moves end in order: the ones before it have ended, the ones
        after it have not)."""
        old = booted(scenario)
        new = {s.server: scenario.flavors[s.flavor] for s in scenario.moves}
        anything = {s: (None, None) for s in old}  # mid-operation: anything but ERROR

        def settled(server, outcome):
            if server not in new or outcome is None:
                return Holding(placed[server], server, "instance", old[server])
            if outcome == "revert":
                return Holding(placed[server], server, "instance", old[server], topology="old")
            return Holding(moved[server], server, "instance", new[server], topology="new")

        def verify_of(server):
            if server not in new:
                return (settled(server, None),)
            return (Holding(placed[server], server, "migration", old[server], running=False,
                            topology="old"),
                    Holding(moved[server], server, "instance", new[server], topology="new"))

        def verify():
            return tuple(h for server in old for h in verify_of(server))

        subject = scenario.subject.server
        order = [m.server for m in scenario.moves]

        def mixed(name, stepping, before, at, after=None):
            """Servers by their move's place in the order: before ``stepping``, it, after it."""
            def holds(server):
                if server == stepping:
                    return at(server)
                if server in order and order.index(server) > order.index(stepping):
                    return (after or at)(server)
                return before(server)
            return Phase(name, tuple(h for server in old for h in holds(server)), anything)

        if name == "verify-resize":
            return Phase(name, verify(), {s: ("VERIFY_RESIZE", "finished") if s in new
                                          else ("ACTIVE", None) for s in old})
        if name == "in-resize":  # between the source's resize_instance and the dest's finish_resize
            return Phase(name, verify(), anything)
        if name == "in-prep":  # the destination's claim: it holds nothing yet, or the new flavor
            return Phase(name, None, anything, (  # the subject moves last: the others are moved
                mixed("after-boot", subject, verify_of, lambda s: (settled(s, None),)),
                Phase("verify-resize", verify(), anything)))
        if name.startswith("in-"):  # inside the ending: each host before or after its step
            ending = name[len("in-"):]
            outcome = ENDING_OUTCOME[ending][0]
            # no ending begun yet (the subject's core has closed, its source is
            # still finishing resize_instance): every move is at VERIFY_RESIZE,
            # the first ending is the next step
            stepping = stepping or order[0]
            ended = lambda s: (settled(s, outcome),)  # noqa: E731
            return Phase(name, None, anything, (
                mixed("verify-resize", stepping, ended, verify_of),
                mixed(f"after-{ending}", stepping, ended, ended, verify_of)))
        outcome, migration = ENDING_OUTCOME[name[len("after-"):]]
        return Phase(name, tuple(settled(s, outcome) for s in old),
                     {s: ("ACTIVE", migration if s in new else None) for s in old})


RESIZE = Resize()
