"""``driver``: the libvirt driver call the compute manager makes at the point
fails, raising the ``libvirtError`` libvirt raises when its daemon gives up
(``VIR_ERR_INTERNAL_ERROR``); Nova's own handling of it runs (its
decorators revert the task state, record the instance fault, set the
migration to error, roll back allocations), then the run waits for the
servers to settle, checks every view against the ledger that follows from
the database as that handling left it and that nothing is left half-done
(:mod:`harness.explore.recovery`), and deletes every server -- what a user
does with a move that failed -- after which nothing may be held anywhere.

It strikes the manager's own driver calls (``ComputeManager.*>driver.*``),
on the host that makes them, but those the libvirt driver cannot fail with a
libvirt error (:data:`NO_LIBVIRT_ERROR`); the resource tracker's driver reads
are the periodic's, not the move's. The error is raised at the driver's
boundary, not from inside libvirt, so the driver's own conversion of it
(``InternalError``, ``InstanceNotFound``) is skipped: the manager meets a
libvirtError where it would meet one of those.
"""
from harness.faults import aftermath
from harness.faults.base import Fault, once_before_endings

#: driver calls the libvirt driver cannot fail with a libvirtError: not struck
NO_LIBVIRT_ERROR = {
    "instance_exists": "LibvirtDriver turns a libvirt error into False",
    "instance_on_disk": "an os.access check, no libvirt call",
    "rebuild": "not LibvirtDriver's: it raises NotImplementedError and the manager falls "
               "back to its own rebuild (whose calls are struck)",
}


class Driver(Fault):
    kind = glob = "driver"
    periodic = False
    label = "driver call failed on"
    fails_call = "libvirt"
    summary = ("driver: the compute manager's libvirt driver call at the point raises "
               "libvirtError, Nova handles it, then every server is deleted")

    @property
    def one_thread(self):
        return False

    @property
    def memoizable(self):
        return False  # the run leaves the traced path at the point: nothing to inherit

    @classmethod
    def parse(cls, spec: str):
        return cls(spec) if spec == cls.kind else None

    def arm(self, injector):
        return DriverStrike(injector)

    def reached(self, traces, endings):
        """The move ends at the failure: a point every ending reaches the same way is one item."""
        return once_before_endings(traces, endings)

    def strikes(self, scen, point_id, targets):
        """The host whose manager makes the driver call at the point (none elsewhere)."""
        rest = point_id.split(":", 1)[1]
        function, label = rest.split(">", 1)
        if not (function.startswith("ComputeManager.") and label.startswith("driver.")):
            return []
        if label.split(".", 1)[1].rsplit("#", 1)[0] in NO_LIBVIRT_ERROR:
            return []
        return self.calling_host(scen, point_id, targets)

    def missed(self, fired_at, hosts, reached):
        return []  # the recovery's checkpoints are planned; missing one is an error already


class DriverStrike(aftermath.ArmedStrike):
    """Raise at the point; the move is over once Nova has handled the failure."""

    failing = "failing"

    def at_point(self, point):
        from nova.tests.fixtures import libvirt as fakelibvirt
        tracer, call = self.injector.tracer, point.callee
        self.injector.run.recovery = list(aftermath.PLANNED)
        tracer.open, tracer.closed = False, True  # what follows is Nova's handling, not the trace
        self.struck(point, f"{call} raised libvirtError", call, ended=True)
        self.taken = True
        raise fakelibvirt.make_libvirtError(
            fakelibvirt.libvirtError, f"internal error: injected by nova-chaos: {call} failed",
            error_code=fakelibvirt.VIR_ERR_INTERNAL_ERROR,
            error_domain=fakelibvirt.VIR_FROM_QEMU)
