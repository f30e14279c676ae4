"""A compute whose heartbeat is minutes old is still up, for every service.

A forked child inherits its parent's heartbeats, as old as the parent has
waited for its children. With Nova's default ``service_down_time`` (60 s)
the API then took a compute for down and deleted a server locally (no
terminate on the host), leaving its domain running: a false finding, seen
once in a loaded crossing sweep. The flag must reach the drivers that copy
it when made (the API's controllers, the scheduler), so it is set before
the services start.
"""
import datetime

from harness import scenario
from harness.cloud.inprocess import Cloud


def test_an_old_heartbeat_does_not_make_a_compute_look_down(nova):
    from nova import context, objects
    with Cloud(scenario.load("pinned-hugepages")) as cloud:
        ctx = context.get_admin_context()
        service = objects.Service.get_by_compute_host(ctx, "host-b")
        stale = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
        service.last_seen_up = stale
        service.save()
        states = {s["host"]: s["state"] for s in cloud.env.api.get_services(binary="nova-compute")}
    assert states == {"host-a": "up", "host-b": "up"}
