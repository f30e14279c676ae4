"""``periodic``: Nova's ``update_available_resource`` runs whole at the point,
deferred to the release of its lock if the point holds it (the default fault)."""
from harness.faults.base import Fault, Strike, target_roles


class Periodic(Fault):
    kind = glob = "periodic"
    implicit = True
    summary = "periodic: the periodic runs whole at each point (the default)"

    @classmethod
    def parse(cls, spec: str):
        return cls(spec) if spec == cls.kind else None

    def arm(self, injector):
        return PeriodicStrike(injector)


class PeriodicStrike(Strike):
    """The periodic on every struck host: at once, or when the point releases its lock
    (``compute_resources@host``: the periodic could not have run inside it)."""

    def at_point(self, point):
        inj, tracer = self.injector.injection, self.injector.tracer
        inj.hosts = list(dict.fromkeys(tracer.host_of_role(r) for r in target_roles(inj.target)))
        for host in inj.hosts:
            lock = f"compute_resources@{host}"
            periodic = lambda h=host, how="now", stage=point.stage: self._run(h, how, stage)  # noqa: E731
            if lock in tracer.held:
                tracer.on_release[lock].append(lambda p=periodic: p(how="deferred"))
            else:
                periodic()

    def _run(self, host, how, stage):
        from harness.oracles import views
        injector = self.injector
        with injector.tracer.suspended():
            injector.note_state(host)
            before = views.snapshot(injector.run.cloud) if injector.injection.detail else None
            self.periodic(host, how, stage, before)

    def periodic(self, host, how, stage, before) -> None:
        """Run it on ``host``, then judge it (``before``: the views as it started, if kept)."""
        self.injector.run.cloud.periodic(host)
        self.injector.judged(host, how, before, stage)

    def over(self, reached):
        inj, tracer = self.injector.injection, self.injector.tracer
        return (super().over(reached) and not any(tracer.on_release.values())
                and all(f"after-injection@{h}" in reached for h in inj.hosts))
