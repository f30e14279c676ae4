"""The restart fault: a compute dies at a yield point and a new one starts on its host.

At the point, the compute whose code makes the call dies: the thread
running that code is frozen for good (no ``finally`` of Nova's runs, as
none would in a killed process; the locks it holds stay held by a process
that is gone), its RPC server stops; its guests run on. The callers of
its RPC carry on as production's would (a cast was delivered; a call
gets no reply). Whatever waits for the move gives up (the cloud's waits
raise :class:`harness.errors.HostCrashed`), and the run recovers: a new
ComputeManager on the same fake host (its ``init_host`` and start-up
periodic run; casts that waited in the queue are delivered), then

* ``after-restart``: every view against the ledger that follows from the
  database as the recovery left it (a move Nova still has in flight -- a
  task state or VERIFY_RESIZE, its migration in progress: both hosts hold
  it, the source the old flavor for the migration, the destination the new
  one for the instance; a server at rest holds its flavor where it lives,
  and nothing anywhere else), and the recovery itself: a server not at
  VERIFY_RESIZE keeps no migration context, no migration in progress and
  no task state (1836369: the move was abandoned half-way);
* ``after-delete``: every server deleted, nothing held anywhere, no
  allocation left (an orphan shows here). A delete Nova refuses (a 500
  after a crash) is a liveness finding there, with what it left.

Locks are per process: with this fault on, every lock a compute takes is
named for its host and incarnation (:attr:`Tracer.incarnations`), so no
one waits for the dead thread's. The callee threads a crash can freeze are
greenlets of the one-thread cloud (:mod:`harness.cloud.one_thread`): the
fault needs it in every mode (fork, fresh, replay) and the threads backend.
"""
from __future__ import annotations

from harness.errors import HarnessError, ScenarioFailed
from harness.oracles import checks
from harness.oracles.ledger import Holding, Phase

#: the checkpoints a run plans once a host died
PLANNED = ["after-boot", "after-restart", "after-delete"]


def install(injector) -> None:
    """Make the run's compute threads freezable and its locks per process."""
    from harness.cloud import nova_support
    cloud = injector.run.cloud
    if not cloud.one_thread or nova_support.current_backend() != "threads":
        raise HarnessError("the restart fault needs the one-thread cloud (the threads "
                           "backend: Nova 34's default)")
    cloud.one_thread.crashable = True
    injector.useFixture(cloud.one_thread.mark_casts())
    injector.tracer.incarnations = {}


def kill(injector, point) -> None:
    """The host whose code makes the call at ``point`` dies here (never returns)."""
    tracer, inj, run = injector.tracer, injector.injection, injector.run
    host = tracer.host_of_role(point.role)
    inj.hosts = [host]
    inj.fired_at.append(f"{host} (killed, restarted)")
    run.recovery = list(PLANNED)
    tracer.open, tracer.closed = False, True  # what follows is the recovery's, not the trace's
    tracer.incarnations[host] = tracer.incarnations.get(host, 0) + 1
    run.where = f"killing {host} at {point.id}"
    with tracer.suspended():  # what the dead host leaves: a root cause's condition
        injector.note_state(host, allocations=True)
    run.cloud.kill(host)


def recover(run, crash) -> None:
    """Restart the dead host, check, bring back any other stopped host, delete all, check."""
    cloud = run.cloud
    run.where = f"restarting {crash.host}"
    cloud.restart_dead(crash.host)
    for host in sorted(cloud.down):  # a fenced host comes back too: nothing else ends its move
        run.where = f"restarting {host}"
        cloud.restart(host)
    run.checkpoint("after-restart", run.quietly(lambda: recovered_phase(run)), exact_cells=False,
                   converge=True)
    refused = []
    for boot in run.scenario.boots:
        run.where = f"delete {boot.server}"
        if cloud.gone(boot.server):  # deleted before the kill surfaced
            continue
        try:
            cloud.delete(boot.server)
        except ScenarioFailed as exc:  # Nova's answer after a crash is evidence, not the end
            refused.append(f"{boot.server}: {exc}")
    if refused:
        run.ending_error = checks.Finding("liveness", "delete after the restart", "success",
                                          "; ".join(refused))
    run.checkpoint("after-delete", run.ledger("after-delete"), converge=True)


def recovered_phase(run) -> Phase:
    """What each host should hold, from the database as the recovery left it.

    Read from the instance and its latest migration, never from the
    resource tracker; each server's status may be anything (a crash may
    leave ERROR; the accounting must still match).
    """
    from nova import context, objects
    from nova.compute import vm_states
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
        # a move Nova still calls in flight (a task state, or waiting at VERIFY_RESIZE):
        # both hosts hold it; a server at rest holds its flavor where it lives, only
        moving = (migration is not None and migration.status not in views.OVER
                  and (inst.task_state is not None or inst.vm_state == vm_states.RESIZED))
        if moving and migration.migration_type == "evacuation":
            # placement holds the instance on both hosts; the down source's guest is fenced
            flavor = flavors[inst.flavor.name]
            holdings += [Holding(migration.source_compute, server, "instance", flavor,
                                 running=False, topology="old"),
                         Holding(migration.dest_compute or inst.host, server, "instance", flavor,
                                 topology="new")]
        elif moving:
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
        else:
            holdings.append(Holding(inst.host, server, "instance", flavors[inst.flavor.name]))
    return Phase("after-restart", tuple(holdings), status, recovered=True)
