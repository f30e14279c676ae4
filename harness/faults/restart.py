"""``restart``: the compute whose code runs at the point dies there (its thread
frozen, as a killed process's) and a new ComputeManager starts on the same
fake host; the item then checks the recovery and deletes every server (the
machinery: :mod:`harness.explore.restart`)."""
from harness.errors import UsageError
from harness.faults.base import Fault, Strike, once_before_endings

#: the operations it is swept on (its recovery ledger knows their moves)
RESTARTABLE = ("resize", "evacuate")


class Restart(Fault):
    kind = glob = "restart"
    periodic = False
    kills = True
    label = "fault"
    operations = RESTARTABLE
    summary = ("restart: the compute whose code runs at the point dies there and restarts "
               "(resize, cold migration, evacuate; threads backend)")

    @classmethod
    def parse(cls, spec: str):
        return cls(spec) if spec == cls.kind else None

    def arm(self, injector):
        return RestartStrike(injector)

    def check_backend(self, backend):
        if backend != "threads":
            raise UsageError(f"fault restart needs the threads backend (Nova 34's default); "
                             f"this run's is {backend} (eventlet is deprecated)")

    def reached(self, traces, endings):
        """Killed before the endings part, no ending ever runs: a point every ending's
        trace reaches the same way is one item (of the first ending)."""
        return once_before_endings(traces, endings)

    def strikes(self, scen, point_id, targets):
        """The host whose code makes the call (its thread is the one frozen)."""
        return self.calling_host(scen, point_id, targets)

    def missed(self, fired_at, hosts, reached):
        return []  # a killed host owes no checkpoint after the point

    def recreate_refusal(self, scen, ending, endings):
        if scen.operation.name not in ("resize", "evacuate"):
            return (f"fault restart in {scen.operation.name}: a recreate test covers a "
                    "restart in a resize, cold migration or evacuation so far")
        return super().recreate_refusal(scen, ending, (*endings, "auto-confirm"))


class RestartStrike(Strike):
    """The compute running the point is killed there, then restarted and checked
    (:mod:`harness.explore.restart`: install, kill, recover)."""

    def install(self):
        from harness.explore import restart
        restart.install(self.injector)

    def at_point(self, point):
        from harness.explore import restart
        restart.kill(self.injector, point)  # never returns: the thread here is the dead host's

    def after_crash(self, run, crash):
        from harness.explore import restart
        restart.recover(run, crash)
