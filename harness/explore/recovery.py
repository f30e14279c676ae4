"""What must hold once a fault ended a move and Nova has handled it.

The ledger then follows from the database as Nova's handling left it
(:func:`recovered_phase`), since no flavor arithmetic can say which of the
move's steps happened; every view is checked against it, then every server
is deleted (what a user does with a move that failed or a host that
restarted under it) and nothing may be held anywhere.
"""
from __future__ import annotations

from harness.errors import ScenarioFailed
from harness.oracles import checks
from harness.oracles.ledger import Holding, Phase


def check_and_delete(run, name: str) -> None:
    """Bring back any stopped host (a fenced evacuation source: nothing else ends its
    move), checkpoint ``name`` against the database's ledger, delete every server, check."""
    cloud = run.cloud
    for host in sorted(cloud.down):
        run.where = f"restarting {host}"
        cloud.restart(host)
    run.checkpoint(name, run.quietly(lambda: recovered_phase(run, name)), exact_cells=False,
                   converge=True)
    refused = []
    for boot in run.scenario.boots:
        run.where = f"delete {boot.server}"
        if cloud.gone(boot.server):  # deleted before the fault surfaced
            continue
        try:
            cloud.delete(boot.server)
        except ScenarioFailed as exc:  # Nova's answer after a fault is evidence, not the end
            refused.append(f"{boot.server}: {exc}")
    if refused:
        run.ending_error = checks.Finding("liveness", f"delete {after_words(name)}", "success",
                                          "; ".join(refused))
    run.checkpoint("after-delete", run.ledger("after-delete"), converge=True)


def after_words(name: str) -> str:
    """``after-restart`` -> ``after the restart``: how findings say where they were seen."""
    return name.replace("after-", "after the ", 1)


def recovered_phase(run, name: str) -> Phase:
    """What each host should hold, from the database as the recovery left it.

    Read from the instance and its latest migration, never from the
    resource tracker; each server's status may be anything (a crash may
    leave ERROR; the accounting must still match).
    """
    from nova import context, objects
    from harness.oracles import views
    flavors = run.scenario.flavors
    ctx = context.get_admin_context()
    holdings, status = [], {}
    for server, uuid in sorted(run.cloud.servers.items()):
        status[server] = ("ANY", None)
        inst = views.instance(ctx, uuid, ["flavor"])
        if inst is None:  # deleted before the kill surfaced (a kill in the deletes): nothing held
            continue
        migration = views.latest_migration(run.cloud, server)
        if not moving(inst, migration):
            # a server at rest holds its flavor where it lives, only; nowhere once
            # Nova nulled its host (an unshelve that failed: shelved offloaded again)
            if inst.host is not None:
                holdings.append(Holding(inst.host, server, "instance", flavors[inst.flavor.name]))
        elif migration.migration_type == "live-migration":
            # the guest runs on the source (the migration's consumer there) and the
            # destination's claim holds it in its new topology (the instance's consumer)
            flavor = flavors[inst.flavor.name]
            holdings += [Holding(migration.source_compute, server, "migration", flavor,
                                 topology="old"),
                         Holding(migration.dest_compute, server, "instance", flavor,
                                 topology="new")]
        elif migration.migration_type == "evacuation":
            # placement holds the instance on both hosts; the down source's guest is fenced
            flavor = flavors[inst.flavor.name]
            holdings += [Holding(migration.source_compute, server, "instance", flavor,
                                 running=False, topology="old"),
                         Holding(migration.dest_compute or inst.host, server, "instance", flavor,
                                 topology="new")]
        else:
            # the migration's own record of the two flavors (the instance stores the
            # new one only once the destination's claim has run)
            old = flavors[objects.Flavor.get_by_id(ctx, migration.old_instance_type_id).name]
            new = flavors[objects.Flavor.get_by_id(ctx, migration.new_instance_type_id).name]
            # killed before the destination's claim named it: the scheduler's pick holds
            # the instance's allocation (and nothing else may)
            dest = migration.dest_compute or (run.tracer.hosts.get("dest") if run.tracer
                                              and server == run.scenario.subject.server else None)
            holdings += [Holding(migration.source_compute, server, "migration", old,
                                 running=False, topology="old"),
                         Holding(dest, server, "instance", new, running=False, topology="new")]
    return Phase(name, tuple(holdings), status, recovered=True)


def moving(inst, migration) -> bool:
    """Whether Nova still has ``inst``'s move in flight: a task state, or waiting at
    VERIFY_RESIZE, with a migration not over -- or a revert whose source has not taken
    the instance back (the destination calls the migration ``reverted`` before the
    source runs its half: until the source saves the instance's host, node and old
    flavor back, it still has its task state, the destination as its host and the new
    flavor; on one host, the flavor tells). Both hosts then hold it."""
    from nova.compute import task_states, vm_states
    from harness.oracles import views
    if migration is None:
        return False
    if inst.task_state == task_states.RESIZE_REVERTING and migration.status == "reverted":
        return (inst.host == migration.dest_compute
                and inst.flavor.id == migration.new_instance_type_id)
    return migration.status not in views.OVER and (
        inst.task_state is not None or inst.vm_state == vm_states.RESIZED)
