"""When a fault that makes one call fail has ended the move: the wait hook of
faults whose error Nova may absorb (placement, rpc).

The in-process cloud runs a move's casts as calls, on the thread of the API
request that started it, and runs no periodic of its own: once the servers'
state stops changing, nothing is left to change it. A move is over when a
server is in ERROR or its migration ``error``/``failed`` and no server has a
task state, or when nothing changed for :data:`STALL_POLLS` polls (a lost
message: the recovery then checks what the stall left). Otherwise it goes on,
and the item runs its ending as any other.
"""
from harness.errors import MoveFailed

#: the checkpoints a failed move plans from the failure on
PLANNED = ["after-boot", "after-failure", "after-delete"]
#: polls of a wait (harness.cloud.inprocess.POLL_SECONDS each) with no server's task
#: state, vm state or latest migration status changing: the move stalled
STALL_POLLS = 40
#: what a failed move leaves its migration as
FAILED_MIGRATION = ("error", "failed")


class Aftermath:
    """``run.cloud.interruption`` for a fault struck on ``host`` at ``what``."""

    def __init__(self, run, host: str, what: str):
        self.run, self.host, self.what = run, host, what
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
        if (failed and not busy) or self.still > STALL_POLLS:
            run.recovery = list(PLANNED)
            stalled = "" if failed and not busy else " (the move stalled)"
            return MoveFailed(self.host, f"{self.what}{stalled}")
        return None


def recover(run, crash) -> None:
    """The move failed: check what Nova left, delete every server, check again."""
    from harness.explore import recovery
    run.cloud.interruption = None
    run.where = f"after {crash}"
    recovery.check_and_delete(run, "after-failure")
