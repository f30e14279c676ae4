"""Inject the periodic ``update_available_resource`` at one yield point.

At the point, on each target host, the periodic runs as production would
schedule it: through the same per-host ``compute_resources`` lock. If that
lock is free, the periodic runs right there, before the call the point
names (the calling green thread yields and the periodic runs to completion).
If the lock is held (the point is inside a resource-tracker critical
section), production's periodic would block on the fair lock and run as
soon as it is released: we defer it to that release -- no deadlock, no
silent skip. Then every check runs against the mid-resize ledger.
"""
from __future__ import annotations

import dataclasses

import fixtures

from harness import checks, ledger, views
from harness.tracer import Tracer

TARGETS = ("source", "dest", "both")
_TARGET_ROLES = {"source": ("source",), "dest": ("dest",), "both": ("source", "dest")}


@dataclasses.dataclass
class Injection:
    point_id: str
    target: str
    detail: bool = False       # record what the periodic changed (replay)
    fired_at: list = dataclasses.field(default_factory=list)  # "host (now|deferred)"
    changes: dict = dataclasses.field(default_factory=dict)   # host -> [(path, before, after)]


class Injector(fixtures.Fixture):
    """A :class:`Tracer` whose hook injects at ``injection.point_id``.

    With ``injection=None`` it only records (the discovery run).
    """

    def __init__(self, run, injection: Injection | None = None, window: str = "resize"):
        super().__init__()
        self.run, self.injection = run, injection
        self.window = window

    def _setUp(self):
        self.tracer = self.useFixture(Tracer(self.window, on_point=self._on_point))
        self.run.tracer = self.tracer

    def _on_point(self, point):
        self.run.where = f"yield point {point.id}"
        inj = self.injection
        if inj is None or point.id != inj.point_id:
            return
        for role in _TARGET_ROLES[inj.target]:
            host = self.tracer.host_of_role(role)
            lock = f"compute_resources@{host}"
            if lock in self.tracer.held:
                self.tracer.on_release[lock].append(lambda h=host: self._periodic(h, "deferred"))
            else:
                self._periodic(host, "now")

    def _periodic(self, host, how):
        with self.tracer.suspended():
            before = views.snapshot(self.run.cloud, self.run.server) if self.injection.detail else None
            self.run.cloud.periodic(host)
            self.injection.fired_at.append(f"{host} ({how})")
            if before is not None:
                after = views.snapshot(self.run.cloud, self.run.server)
                self.injection.changes[host] = checks.diff_snapshots(before, after)
            phase = ledger.in_resize(self.run.scenario, self.tracer.host_of_role("source"),
                                     self.tracer.host_of_role("dest"))
            self.run.checkpoint(f"after-injection@{host}", phase, exact_cells=False,
                                converge=False)
