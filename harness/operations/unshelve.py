"""Unshelve after shelve-offload: nothing is held anywhere until the destination claims and spawns.

The shelve-offload is part of the prefix (it frees everything: allocations
deleted, host nulled); the unshelve to the step's host is what is swept.
There is no source host: the only target is the destination. Its one
ending is the unshelve itself.
"""
from __future__ import annotations

from harness.errors import ScenarioFailed
from harness.operations.base import (Bounds, Operation, boot_all, booted, end_and_delete,
                                      ending_failed, unmoved)
from harness.oracles.ledger import Holding, Phase


class Unshelve(Operation):
    name = "unshelve"
    ops = ("unshelve",)
    endings = ("unshelve",)
    targets = ("dest",)
    mid = "shelved"
    only_move = "an unshelve"
    core_phase = "in-unshelve"
    # the destination's unshelve_instance, its claim and spawn inside _unshelve_instance
    bounds = Bounds(opens=("unshelve_instance", "dest"), closes=(("unshelve_instance", "dest"),),
                    core=(("_unshelve_instance", "dest"), ("_unshelve_instance", "dest")))

    def steps(self, run) -> None:
        boot_all(run)
        move = run.scenario.subject
        run.where = f"shelve-offload {move.server}"
        run.cloud.shelve_offload(move.server)
        run.checkpoint(self.mid, run.ledger(self.mid))
        run.hooks.before_ending(run)  # one ending: nothing to branch
        run.where = f"unshelve {move.server}"
        run.ending_server = move.server
        try:
            server = run.cloud.unshelve(move.server, move.host)
        except ScenarioFailed as exc:
            ending_failed(run, move.server, exc)
            server = run.cloud.server(move.server)
        run.moved[move.server] = server["OS-EXT-SRV-ATTR:host"]
        end_and_delete(run)

    def own_phase(self, scenario, placed, moved, name, stepping=None) -> Phase:
        old = booted(scenario)
        subject = scenario.subject.server
        others = unmoved(scenario, placed)
        status = {s: ("ACTIVE", None) for s in old}
        shelved = Phase(self.mid, others, dict(status, **{subject: ("SHELVED_OFFLOADED", None)}))
        after = Phase("after-unshelve", others + (
            Holding(moved.get(subject), subject, "instance", old[subject]),), status)
        if name == self.mid:
            return shelved
        if name == "after-unshelve":
            return after
        if name in ("in-prep", "in-unshelve"):  # the claim is made inside: before it or after
            anything = {s: (None, None) for s in old}
            return Phase(name, None, anything, (shelved, after))
        raise KeyError(f"no phase {name!r} in an unshelve")


UNSHELVE = Unshelve()
