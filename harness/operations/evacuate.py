"""Evacuate: the source is fenced and down, the server is rebuilt elsewhere, the source comes back.

The fence is part of the prefix: the source's compute stops, its guests
stop but stay defined (they hold nothing on the host), its service is
forced down. The destination's ``rebuild_instance`` is the move: it claims
(``rebuild_claim``), spawns, saves, and ``finish_evacuation`` sets the host
and drops the migration context under the resource tracker's lock (the fix
of 1896463). All the while the down source's compute node row keeps what it
last saved, and placement holds the instance on both hosts. The one ending
is the source's restart: a new ComputeManager whose ``init_host`` destroys
the evacuated guest and removes its source allocations
(``_destroy_evacuated_instances``), the migration 'completed'.

Only the destination runs periodics meanwhile: the source is down until its
restart, and a restarting compute runs none before its ``init_host`` ends.
"""
from __future__ import annotations

from harness.operations.base import (Bounds, Operation, boot_all, booted, end_and_delete,
                                      unmoved)
from harness.oracles.ledger import Holding, Phase

ENDING = "source-restart"


class Evacuate(Operation):
    name = "evacuate"
    ops = ("evacuate",)
    endings = (ENDING,)
    targets = ("dest",)
    mid = "evacuated"
    only_move = "an evacuation"
    core_phase = "in-evacuate"
    # the destination's rebuild, through the source's init_host after its restart;
    # the core: from the claim's caller until finish_evacuation has run
    bounds = Bounds(opens=("rebuild_instance", "dest"), closes=(("init_host", "source"),),
                    core=(("_do_rebuild_instance_with_claim", "dest"), ("rebuild_instance", "dest")))

    def planned(self, ending: str) -> list:
        return ["after-boot", "fenced", self.mid, f"after-{ending}", "after-delete"]

    def validate(self, moves, where: str, steps=()) -> str | None:
        why = super().validate(moves, where, steps)
        if why:
            return why
        move = moves[-1]
        source = next(s.host for s in steps if s.op == "boot" and s.server == move.server)
        if source is None:
            return f"{where}: the evacuated server {move.server!r} needs a host to boot on"
        others = [s.server for s in steps if s.op == "boot" and s.host == source
                  and s.server != move.server]
        if others:
            return (f"{where}: only {move.server!r} may be on {source}, the host it is evacuated "
                    f"from (also there: {', '.join(others)})")
        return None

    def steps(self, run) -> None:
        from harness.oracles import views
        boot_all(run)
        move = run.scenario.subject
        source = run.placed[move.server]
        run.where = f"fence {source}"
        run.cloud.fence(source)
        # the source keeps counting the topology the guest booted with; once
        # the evacuation has dropped its migration context nothing else says it
        booted_with = views.topology_view(run.cloud)[move.server]["current"]
        run.chosen.setdefault(move.server, {})["old"] = booted_with
        run.checkpoint("fenced", run.ledger("fenced"))
        run.where = f"evacuate {move.server}"
        server = run.cloud.evacuate(move.server, move.host)
        run.moved[move.server] = server["OS-EXT-SRV-ATTR:host"]
        run.checkpoint(self.mid, run.ledger(self.mid))
        run.hooks.before_ending(run)  # one ending: nothing to branch
        run.where = f"restart {source}"
        run.ending_server = move.server
        run.cloud.restart(source)
        end_and_delete(run)

    def own_phase(self, scenario, placed, moved, name, stepping=None) -> Phase:
        old = booted(scenario)
        subject = scenario.subject.server
        flavor = old[subject]
        source, dest = placed[subject], moved.get(subject)
        others = unmoved(scenario, placed)
        anything = {s: (None, None) for s in old}
        active = {s: ("ACTIVE", None) for s in old}
        fenced_there = Holding(source, subject, "instance", flavor, running=False, topology="old")
        fenced = Phase("fenced", others + (fenced_there,), active)
        evacuated = Phase(self.mid, others + (
            fenced_there, Holding(dest, subject, "instance", flavor, topology="new")),
            dict(active, **{subject: ("ACTIVE", "done")}))
        after = Phase(f"after-{ENDING}", others + (Holding(dest, subject, "instance", flavor),),
                      dict(active, **{subject: ("ACTIVE", "completed")}))
        phases = {p.name: p for p in (fenced, evacuated, after)}
        if name in phases:
            return phases[name]
        if name in ("in-prep", self.core_phase):  # the destination claims inside: before or after
            return Phase(name, None, anything, (fenced, evacuated))
        if name == f"in-{ENDING}":  # the source cleans up as it starts: before or after
            return Phase(name, None, anything, (evacuated, after))
        raise KeyError(f"no phase {name!r} in an evacuation")


EVACUATE = Evacuate()
