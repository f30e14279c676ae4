"""Live migration: the job runs with the guest on both hosts; it succeeds or is rolled back.

The outcome is the run's ending, chosen at the moment the job ends (the
fake host asks: :attr:`fake_driver.host.FakeLibvirtHost.on_job_settle`),
so everything before it is one prefix for both endings. There the move is
checked in flight -- both hosts hold the flavor, placement holds the
source for the migration and the destination for the instance -- and a
fork-mode run branches per ending. Success stops and undefines the source
domain; a failed job destroys the destination one and Nova rolls back.
"""
from __future__ import annotations

from harness.errors import ScenarioFailed
from harness.operations.base import (Bounds, Operation, boot_all, booted, end_and_delete,
                                      ending_failed, unmoved)
from harness.oracles.ledger import Holding, Phase

#: ending -> (the job's outcome on the fake host, the migration's final status)
ENDINGS = {"success": ("complete", "completed"), "rollback": ("fail", "failed")}


class LiveMigration(Operation):
    name = "live-migration"
    ops = ("live-migrate",)
    endings = tuple(ENDINGS)
    mid = "in-flight"
    only_move = "a live migration"
    core_phase = "in-flight"
    # the destination's checks (and claim), until the source is done, either way;
    # the core: the source runs the migration, until the job's outcome is decided
    bounds = Bounds(opens=("check_can_live_migrate_destination", "dest"),
                    closes=(("_post_live_migration", "source"),
                            ("_rollback_live_migration", "source")),
                    core=(("live_migration", "source"), None))

    def steps(self, run) -> None:
        boot_all(run)
        move = run.scenario.subject
        decision = {}

        def decide():  # in Nova's job monitor, as the job is about to end
            try:
                self._decide(run, move.server)
                decision["done"] = True
            except Exception as exc:  # Nova would swallow it into a failed migration
                decision["error"] = f"{type(exc).__name__}: {exc}"

        run.where = f"live-migrate {move.server}"
        with run.cloud.job_decisions(lambda: run.quietly(decide)):
            try:
                server = run.cloud.live_migrate(move.server, move.host)
            except ScenarioFailed as exc:
                if "done" not in decision:  # the move never reached its ending
                    raise
                ending_failed(run, move.server, exc)
                server = None
        if "error" in decision:
            raise ScenarioFailed(f"choosing the live-migration job's outcome: {decision['error']}")
        if "done" not in decision:
            raise ScenarioFailed(f"live-migrate {move.server}: the migration ended (server "
                                 f"{server['status']}) without a job running")
        run.where = f"after the live migration of {move.server}"
        end_and_delete(run)

    def _decide(self, run, server):
        from harness.oracles import views
        run.where = f"live migration of {server}: the job in flight"
        run.moved[server] = views.latest_migration(run.cloud, server).dest_compute
        run.ending_server = server
        run.checkpoint(self.mid, run.ledger(self.mid))
        run.hooks.before_ending(run)  # a fork-mode run branches per ending here
        if run.tracer is not None:
            run.tracer.decide()
        run.cloud.set_job_outcome(ENDINGS[run.ending][0])
        run.where = f"live migration of {server}: {run.ending}"

    def own_phase(self, scenario, placed, moved, name, stepping=None) -> Phase:
        old = booted(scenario)
        subject = scenario.subject.server
        anything = {s: (None, None) for s in old}
        others = unmoved(scenario, placed)
        flavor = old[subject]
        source, dest = placed[subject], moved.get(subject)
        flight = Phase(self.mid, others + (
            Holding(source, subject, "migration", flavor, topology="old"),
            Holding(dest, subject, "instance", flavor, topology="new")), anything)
        before = Phase("after-boot", others + (Holding(source, subject, "instance", flavor),),
                       anything)
        if name == self.mid:
            return flight
        if name == "in-prep":  # the destination's claim: not made yet, or made
            return Phase(name, None, anything, (before, flight))
        ending = name.split("-", 1)[1]
        if ending not in ENDINGS:
            raise KeyError(f"no phase {name!r} in a live migration")
        held = (Holding(dest, subject, "instance", flavor, topology="new") if ending == "success"
                else Holding(source, subject, "instance", flavor, topology="old"))
        after = Phase(f"after-{ending}", others + (held,),
                      {s: ("ACTIVE", ENDINGS[ending][1] if s == subject else None) for s in old})
        if name.startswith("after-"):
            return after
        return Phase(name, None, anything, (flight, after))


LIVE_MIGRATION = LiveMigration()
