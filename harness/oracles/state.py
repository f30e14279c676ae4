"""The state an injected periodic acts on, read at the point from Nova itself.

A known finding is a mechanism in Nova: a condition on this state and its
effect on the ledger (issue 30). The condition is stated over what Nova
holds when the fault strikes -- never over the name of the call it strikes
before -- so a harmless extra call inside a known window is the same cause.
These facts are read from Nova's database and the striking host's resource
tracker (the harness's own read: no yield point is recorded), before the
periodic runs, and kept with the item.

Hosts are named by their role in the move (``source``, ``dest``; ``other``
for a host the move does not involve) so the facts of two scenarios with
other host names compare.
"""
from __future__ import annotations


def _role(roles: dict, host) -> str | None:
    if host is None:
        return None
    return roles.get(host, "other")


def at_point(cloud, server: str, host: str, roles: dict) -> dict:
    """Facts about the subject ``server`` as ``host``'s periodic is about to see them.

    ``roles``: host name -> role in the move. Read: the instance (its host
    and node, vm and task state, whether its migration context and old/new
    flavors are set), its newest migration (type, status, source and dest),
    and whether ``host``'s tracker tracks that migration and the instance.
    """
    from nova import context, objects
    ctx = context.get_admin_context()
    uuid = cloud.servers[server]
    inst = objects.Instance.get_by_uuid(
        ctx, uuid, expected_attrs=["migration_context", "flavor"])
    migrations = objects.MigrationList.get_by_filters(ctx, {"instance_uuid": uuid})
    migration = max(migrations, key=lambda m: m.id) if len(migrations) else None
    tracker = cloud.compute(host).rt
    return {
        "runs_on": _role(roles, host),
        "instance": {
            "host": _role(roles, inst.host), "node": _role(roles, inst.node),
            "vm_state": inst.vm_state, "task_state": inst.task_state,
            "migration_context": inst.migration_context is not None,
            "old_flavor": inst.old_flavor is not None,
            "new_flavor": inst.new_flavor is not None,
        },
        "migration": None if migration is None else {
            "type": migration.migration_type, "status": migration.status,
            "source": _role(roles, migration.source_compute),
            "dest": _role(roles, migration.dest_compute),
        },
        "tracked": {
            "migration": uuid in tracker.tracked_migrations,
            "instance": uuid in tracker.tracked_instances,
        },
    }
