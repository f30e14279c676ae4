"""Faults that make a call of the move fail (driver, placement, rpc): the strike
they share, and when the failure has ended the move.

Placement and rpc arm the striking thread (its next message fails); the
driver raises at the point itself. The in-process cloud runs a move's casts
as calls, on the thread of the API request that started it, and runs no
periodic of its own: once the servers' state stops changing, nothing is
left to change it. A move is over when a server is in ERROR or its
migration ``error``/``failed`` and no server has a task state (for a raised
call, as soon as no server has one), or when nothing changed for
:data:`STALL_POLLS` polls (a lost message: the recovery then checks what
the stall left). Otherwise it goes on, and the item runs its ending as any
other.
"""
import threading

from harness.errors import MoveFailed
from harness.faults.base import Strike
from harness.faults.casts import CastsDrop

#: the checkpoints a failed move plans from the failure on
PLANNED = ["after-boot", "after-failure", "after-delete"]
#: polls of a wait (harness.cloud.inprocess.POLL_SECONDS each) with no server's task
#: state, vm state or latest migration status changing: the move stalled
STALL_POLLS = 40
#: what a failed move leaves its migration as
FAILED_MIGRATION = ("error", "failed")


class Aftermath:
    """``run.cloud.interruption`` for a fault struck on ``host`` at ``what``; ``ended``:
    the fault ended the move (a raised call), which is then over as soon as no server
    has a task state -- Nova's handling may leave no error to see (an unshelve put
    back on the shelf)."""

    def __init__(self, run, host: str, what: str, ended: bool = False):
        self.run, self.host, self.what, self.ended = run, host, what, ended
        self.state, self.still = None, 0

    def __call__(self):
        from nova import context
        from harness.oracles import views
        run = self.run
        ctx = context.get_admin_context()
        now = []
        for server, uuid in sorted(run.cloud.servers.items()):
            inst = views.instance(ctx, uuid, [])
            migration = views.latest_migration(run.cloud, server)
            now.append((getattr(inst, "task_state", None), getattr(inst, "vm_state", None),
                        getattr(migration, "status", None)))
        self.still = self.still + 1 if now == self.state else 0
        self.state = now
        busy = any(task for task, _, _ in now)
        failed = any(vm == "error" or status in FAILED_MIGRATION for _, vm, status in now)
        settled = (failed or self.ended) and not busy
        if settled or self.still > STALL_POLLS:
            run.recovery = list(PLANNED)
            return MoveFailed(self.host, self.what + ("" if settled else " (the move stalled)"))
        return None


def recover(run, crash) -> None:
    """The move failed: check what Nova left, delete every server, check again."""
    from harness.explore import recovery
    run.cloud.interruption = None
    run.where = f"after {crash}"
    recovery.check_and_delete(run, "after-failure")


class ArmedStrike(Strike):
    """At the point, arm the striking thread: the next message it sends is the one that
    fails (a subclass's ``install`` patches the path it takes and calls :meth:`take`).
    A cast's sender never sees what the failure raised in the step it struck
    (:class:`CastsDrop`), up to the next checkpoint."""

    #: what the item's ``fired`` says until the message is sent (``to ...``), and once
    #: it failed
    pending = failing = ""

    def __init__(self, injector):
        super().__init__(injector)
        self.armed = threading.local()
        self.taken = False
        self.checked = False  # a checkpoint ran since: what casts raise now is not the fault's

    def install(self):
        # what the failed message's step raises, until the run checks what it left (the
        # recovery's deletes then meet Nova as any user's do)
        self.injector.useFixture(CastsDrop(lambda exc: self.taken and not self.checked))

    def before_check(self, name):
        if self.taken:
            self.checked = True

    def take(self, how: str) -> bool:
        """Whether the message being sent is the armed one; if so it fails ``how``."""
        if getattr(self.armed, "point", None) is None:
            return False
        self.armed.point = None
        inj = self.injector.injection
        inj.fired_at[-1] = inj.fired_at[-1].replace(self.pending, how)
        self.taken = True
        return True

    def at_point(self, point):
        self.struck(point, f"{point.callee} {self.pending}", f"{point.callee} {self.failing}")
        self.armed.point = point.id

    def struck(self, point, fired: str, what: str, ended: bool = False) -> str:
        """Record the strike at ``point`` on the host of its role (``fired``: what the
        item says it did there), note the state it met and let the waits end once the
        failure is over (:class:`Aftermath` of ``what``); the host."""
        injector = self.injector
        tracer, run = injector.tracer, injector.run
        host = tracer.host_of_role(point.role)
        injector.injection.hosts = [host]
        injector.injection.fired_at.append(f"{host} ({fired})")
        run.where = f"{point.callee} {self.failing} on {host} at {point.id}"
        with tracer.suspended():  # what the failure meets: a root cause's condition
            injector.note_state(host, allocations=True)
        run.cloud.interruption = Aftermath(run, host, what, ended=ended)
        return host

    def after_crash(self, run, crash):
        recover(run, crash)

    def abandon(self):
        self.armed.point = None


def unsent(fired_at: list, what: str) -> list:
    """A ``missed`` answer: the armed message (still ``to ...``) was never sent."""
    return [f"injection did not fire: {f.split('(', 1)[0].strip()} sent {what} after the point"
            for f in fired_at if " to " in f]
