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

from harness.errors import HarnessError
from harness.explore import recovery

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
    recovery.check_and_delete(run, "after-restart")
