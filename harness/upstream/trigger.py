"""Turn a yield point into a trigger a plain Nova test can stub: the N-th call.

A point id names a call by the harness's tracer (its caller, opacity rules,
window-relative occurrence). An exported test cannot carry the tracer, so
it counts plainer: every call of the callee made by one compute host from
the move's request on (:class:`harness.upstream.prelude.Trigger`). This
module runs the item with both -- the tracer and that counter -- and reads
the counter where the tracer reaches the point, before the injection there:
the same code counts here and in the exported test.
"""
from __future__ import annotations

import dataclasses

from harness.errors import UsageError
from harness.execute import runner
from harness.explore import injection, point_ids, yieldpoints


@dataclasses.dataclass(frozen=True)
class Found:
    """What the exported test stubs, and the item's run it was counted in."""

    callee: str        # dotted path of the attribute to wrap
    detail: str | None  # a notification's event type, a lock's name
    host: str          # whose call (the role's host in this run)
    nth: int           # counted from the move's request on
    run: object        # the uninjected runner.Run (placed/moved hosts, trace)


def callee_path(label: str) -> tuple:
    """A point's callee label -> (dotted path to wrap, detail)."""
    from oslo_concurrency import lockutils
    from nova import objects
    from nova.virt.libvirt.driver import LibvirtDriver
    objects.register_all()  # every object's methods, not only those imported so far
    if label.startswith("lock."):
        return f"{lockutils.__name__}.lock", label[len("lock."):]
    for prefix in ("notify_usage.", "notify."):
        if label.startswith(prefix):
            base, detail = prefix[:-1], label[len(prefix):]
            break
    else:
        base, detail = label, None
    for _, owner, attr, row_label in yieldpoints.all_targets(LibvirtDriver):
        if row_label == base:
            where = getattr(owner, "__qualname__", None)
            module = owner.__module__ if where else owner.__name__
            return ".".join(filter(None, (module, where, attr))), detail
    raise UsageError(f"cannot stub point callee {label!r}: no instrumented call has that name")


def find(scen, item, traces) -> tuple:
    """Run ``item`` (judged, with detail) with a counter beside its tracer:
    ``(its trigger, its campaign.Record)``. Up to the point the run is the
    uninjected one, so the count there is what a plain test will see."""
    import time
    from harness.execute import campaign
    from harness.upstream import prelude
    callee = point_ids.callee(item.point)
    path, detail = callee_path(callee)
    role = item.point.split(":", 1)[0]
    seen = {}
    inj = injection.Injection(item.point, item.target, item.fault, detail=True)
    run = runner.Run(scen, item.ending, converge_every=False)

    class Counting(injection.Injector):
        def _setUp(self):
            super()._setUp()
            self.counters = {}
            cloud = run.cloud
            real_post = cloud.post_action

            def post_action(name, body, what):  # armed at the move's request, as exported
                if not self.counters and any(k in body for k in ("resize", "migrate")):
                    for host in scen.hosts:
                        self.counters[host.name] = self.useFixture(
                            prelude.Trigger(path, detail, host.name))
                        self.counters[host.name].arm()
                return real_post(name, body, what)
            cloud.post_action = post_action
            self.addCleanup(vars(cloud).pop, "post_action", None)

        def _on_point(self, point):
            if point.id == item.point and "nth" not in seen:  # before it injects there
                host = seen["host"] = self.tracer.hosts.get(role)
                seen["nth"] = self.counters[host].calls if host in self.counters else None
            super()._on_point(point)

    started = time.monotonic()
    run.execute(lambda r: Counting(r, inj, item.window))
    record = campaign.judge(item, run, inj, traces, None, started)
    return Found(path, detail, seen.get("host"), seen.get("nth"), run), record
