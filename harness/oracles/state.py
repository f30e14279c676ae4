"""The state an injected periodic acts on, read at the point from Nova itself.

A known finding is a root cause in Nova (:mod:`harness.oracles.causes`): a
condition on this state and its effect on the ledger. The condition is
stated over what Nova holds when the fault strikes -- never over the name
of the call it strikes before -- so a harmless extra call inside a known
window is the same cause. These facts are read from Nova's database and
the striking host's resource tracker (the harness's own read: no yield
point is recorded), before the periodic runs, and kept with the item.

Facts are per server, and each server's hosts are named by their role in
*its own* move (``source``, ``dest``; ``other`` for a host its move does
not involve; a server that never moved has only ``other`` hosts), so the
facts of two scenarios -- or of two servers crossing in opposite
directions -- compare. A split periodic (stopped between its instance and
migration reads) also keeps, per server, what its second read met
(``resumed``).
"""
from __future__ import annotations


def _role(roles: dict, host) -> str | None:
    if host is None:
        return None
    return roles.get(host, "other")


def at_point(cloud, host: str, allocations: bool = False) -> dict:
    """Facts about every server as ``host``'s periodic is about to see them.

    Per server: the role of ``host`` in its move (``runs_on``), the host
    names behind the roles (``hosts``), the instance (its host and node, vm
    and task state, whether its migration context and old/new flavors are
    set, which of the move's NUMA topologies it has), its newest migration (type, status, source and dest), and whether
    ``host``'s tracker tracks that migration and the instance. With
    ``allocations`` (a restart: which step's writes are done), also where
    placement holds the instance's and the migration's allocations, and where
    the fake hosts define and run its domain (``guest``), as roles.
    """
    return {server: _server_facts(cloud, uuid, host, allocations)
            for server, uuid in sorted(cloud.servers.items())}


def _server_facts(cloud, uuid: str, host: str, allocations: bool = False) -> dict:
    from nova import context, exception, objects
    ctx = context.get_admin_context()
    try:
        inst = objects.Instance.get_by_uuid(
            ctx, uuid, expected_attrs=["migration_context", "flavor", "numa_topology"])
    except exception.InstanceNotFound:
        return {"deleted": True}
    migrations = objects.MigrationList.get_by_filters(ctx, {"instance_uuid": uuid})
    migration = max(migrations, key=lambda m: m.id) if len(migrations) else None
    roles = {}
    if migration is not None:  # a same-host move: the one host is its source
        dest = migration.dest_compute or _picked(cloud, uuid, migration)
        roles = {dest: "dest", migration.source_compute: "source"}
        roles.pop(None, None)
    tracker = cloud.compute(host).rt
    facts = {
        "runs_on": _role(roles, host),
        "hosts": {role: name for name, role in sorted(roles.items())},
        "instance": {
            "host": _role(roles, inst.host), "node": _role(roles, inst.node),
            "vm_state": inst.vm_state, "task_state": inst.task_state,
            "migration_context": inst.migration_context is not None,
            "old_flavor": inst.old_flavor is not None,
            "new_flavor": inst.new_flavor is not None,
            "topology": _which_topology(inst),
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
    if allocations:
        consumers = {"instance": uuid, "migration": migration.uuid if migration else None}
        facts["allocations"] = {kind: _held_on(cloud, consumer, roles)
                                for kind, consumer in consumers.items()}
        facts["guest"] = _guest(cloud, inst.name, roles)
    return facts


def _guest(cloud, name: str, roles: dict) -> dict:
    """Where the fake hosts define and run the instance's domain, as roles."""
    where: dict = {"defined": [], "running": []}
    for host in cloud.scenario.hosts:
        held = cloud.libvirt_host(host.name).state()
        if name in held["domains"]:
            where["defined"].append(_role(roles, host.name))
        if name in held["running"]:
            where["running"].append(_role(roles, host.name))
    return {k: "+".join(sorted(v)) or None for k, v in where.items()}


def _which_topology(inst) -> str | None:
    """Which of its move's NUMA topologies the instance's own is: ``old``, ``new``
    (``old+new`` when they pin alike), None without a migration context or topology."""
    from harness.oracles.views import guest_cells
    mc, mine = inst.migration_context, guest_cells(inst.numa_topology)
    if mc is None or not mine:
        return None
    same = [name for name, topology in (("old", mc.old_numa_topology),
                                        ("new", mc.new_numa_topology))
            if guest_cells(topology) == mine]
    return "+".join(same) or "neither"


def _picked(cloud, uuid: str, migration) -> str | None:
    """Before the destination's claim names it in the migration: the host the
    scheduler picked, which holds the instance's allocation once the conductor
    moved the source's to the migration (the source itself for a same-host move)."""
    held = _providers(cloud, uuid)
    others = [h for h in held if h != migration.source_compute]
    if len(others) == 1:
        return others[0]
    moved = held == [migration.source_compute] and _providers(cloud, migration.uuid)
    return migration.source_compute if moved else None


def _held_on(cloud, consumer, roles: dict) -> str | None:
    """The roles of the hosts whose providers hold ``consumer``'s allocation
    (``"source+dest"``), None if none does."""
    held = _providers(cloud, consumer) if consumer else []
    return "+".join(sorted(_role(roles, host) for host in held)) or None


def _providers(cloud, consumer: str) -> list:
    """The hosts whose providers hold ``consumer``'s allocation."""
    names = {cloud.rp_uuid(h.name): h.name for h in cloud.scenario.hosts}
    body = cloud.env.placement.get(f"/allocations/{consumer}", version="1.28").body
    return [names.get(rp, rp) for rp in body["allocations"]]
