"""``split`` / ``split:N`` (depth two): the periodic stops between its instance
and migration reads and finishes after N of the operation's calls (default
one), or earlier if something asks for its lock, and before the next
checkpoint (the greenlet that stops it: :mod:`harness.explore.split`)."""
from harness.faults.periodic import Periodic, PeriodicStrike


class Split(Periodic):
    kind, glob = "split", "split*"
    implicit = False
    recreatable = False
    summary = ("split: it stops between its instance and migration reads and finishes at "
               "the next yield point; split:N after N of the operation's calls (depth two)")

    def __init__(self, spec: str, calls: int):
        super().__init__(spec)
        self.pause_calls = calls

    @classmethod
    def parse(cls, spec: str):
        kind, colon, n = spec.partition(":")
        if kind != cls.kind:
            return None
        if not colon:
            return cls(spec, 1)
        return cls(spec, int(n)) if n.isdigit() and int(n) >= 1 else None

    def arm(self, injector):
        return SplitStrike(injector, self.pause_calls)

    def missed(self, fired_at, hosts, reached):
        """Depth two or nothing proved: it must have stopped between its reads."""
        return super().missed(fired_at, hosts, reached) + [
            f"the split periodic never stopped between its reads: {fired}"
            for fired in fired_at if "split: resumed at " not in fired]


class SplitStrike(PeriodicStrike):
    """The periodic stopped inside itself on each struck host, finished later
    (:meth:`on_call`, :meth:`before_check`, a request for its lock); judged then."""

    def __init__(self, injector, calls: int):
        super().__init__(injector)
        self.calls = calls
        self.paused: dict = {}  # host -> [Split, how, snapshot before, calls left]

    def periodic(self, host, how, stage, before):
        from harness.explore import split
        injector = self.injector
        tracer, cloud = injector.tracer, injector.run.cloud
        one = cloud.one_thread or None
        part = split.make(lambda ctx: cloud.periodic(host, ctx),
                          [tracer._local, *(one._locals if one else ())], one)
        injector.pause_hook.splits.append(part)
        part.run()
        if part.paused:  # it finishes later (on_call, before_check); judged then
            self.paused[host] = [part, how, before, self.calls]
            tracer.before_acquire[f"compute_resources@{host}"] = (
                lambda: self._resume_all(f"a request for compute_resources@{host}"))
            return
        injector.judged(host, how + ", never stopped inside", before, stage)

    def on_call(self, point_id):
        """One more call of the operation: finish the paused periodics whose calls are up."""
        for host in list(self.paused):
            paused = self.paused.get(host)  # one resumed before may have finished it
            if paused is None:
                continue
            paused[3] -= 1
            if paused[3] <= 0:
                self._resume(host, point_id)

    def before_check(self, name):
        self._resume_all(f"checkpoint {name}")

    def abandon(self):
        """The run stopped with a periodic paused: let it finish (its lock), judge nothing."""
        while self.paused:
            self.paused.popitem()[1][0].run()

    def over(self, reached):
        return not self.paused and super().over(reached)

    def _resume_all(self, where: str) -> None:
        for host in list(self.paused):
            self._resume(host, where)

    def _resume(self, host: str, where: str) -> None:
        """Finish the periodic stopped inside itself on ``host``, here; then judge it."""
        paused = self.paused.pop(host, None)
        if paused is None:  # another's checkpoint, on the way here, finished it
            return
        part, how, before, _ = paused
        injector = self.injector
        injector.tracer.before_acquire.pop(f"compute_resources@{host}", None)
        with injector.tracer.suspended():
            injector.note_state(host, resumed=True)
            part.run()
            injector.judged(host, f"{how}, split: resumed at {where}", before,
                            injector.tracer.stage())
