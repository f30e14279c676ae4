"""Read the three independent views of resource usage, as plain data.

* resource tracker: each host's ``ComputeNode`` row as saved (``numa_topology``
  cells' ``pinned_cpus``, ``mempages[*].used`` (hugepages and small pages),
  ``memory_usage``, ``cpu_usage`` (floating vCPUs); ``vcpus_used``,
  ``memory_mb_used``) -- where bug 1944759 loses data;
* placement: allocations per consumer (instance, migration) per provider,
  and each provider's usages;
* ground truth: what the fake libvirt hosts' domains really hold.

Snapshots are plain dicts of sorted lists so that two of them compare with
``==`` and print readably.
"""
from __future__ import annotations

#: small page size (KiB): Nova's mempages and the fake host count these apart
SMALL = 4


def rt_view(cloud, host: str) -> dict:
    from nova import context, objects
    ctx = context.get_admin_context()
    cn = objects.ComputeNode.get_by_host_and_nodename(ctx, host, host)
    cells = {}
    if cn.numa_topology:
        topo = objects.NUMATopology.obj_from_db_obj(cn.numa_topology)
        for cell in topo.cells:
            cells[cell.id] = {
                "cpus": sorted(cell.pinned_cpus),
                "pages": {m.size_kb: m.used for m in cell.mempages if m.size_kb > SMALL and m.used},
                "small_pages": sum(m.used for m in cell.mempages if m.size_kb == SMALL),
                "memory_mb": cell.memory_usage,
                "shared": cell.cpu_usage,
            }
    return {"vcpus_used": cn.vcpus_used, "memory_mb_used": cn.memory_mb_used, "cells": cells}


def placement_view(cloud, consumers: dict) -> dict:
    """``consumers``: name ("vm1 instance", "vm1 migration") -> consumer uuid."""
    hosts = {cloud.rp_uuid(h.name): h.name for h in cloud.scenario.hosts}
    nested = cloud.scenario.pci is not None  # PCI providers: the PCI view reads them
    allocations = {}
    for kind, uuid in sorted(consumers.items()):
        body = cloud.env.placement.get(f"/allocations/{uuid}", version="1.28").body
        allocations[kind] = {hosts.get(rp, rp): dict(sorted(a["resources"].items()))
                             for rp, a in sorted(body["allocations"].items())
                             if rp in hosts or not nested}
    usages = {}
    for rp, host in sorted(hosts.items(), key=lambda kv: kv[1]):
        body = cloud.env.placement.get(f"/resource_providers/{rp}/usages").body
        usages[host] = {k: v for k, v in sorted(body["usages"].items()) if v}
    return {"allocations": allocations, "usages": usages}


def _plain(per_cell: dict) -> dict:
    """The fake host's answer in the RT view's terms: hugepages apart from small pages."""
    def held(v):
        return {"cpus": sorted(v["cpus"]),
                "pages": {s: n for s, n in sorted(v["pages"].items()) if s > SMALL},
                "small_pages": v["pages"].get(SMALL, 0), "memory_mb": v["memory_kb"] // 1024,
                "shared": v["shared"]}
    return {cell: dict(held(v), by_domain={n: held(d) for n, d in v["by_domain"].items()})
            for cell, v in per_cell.items()}


def truth_view(cloud, host: str) -> dict:
    conn = cloud.libvirt_host(host)
    return {"running": _plain(conn.ground_truth()), "defined": _plain(conn.defined_claims())}


def guest_cells(topology) -> list:
    """An InstanceNUMATopology as what its guest holds in each host cell (the RT view's terms)."""
    if topology is None:
        return []
    out = []
    for cell in topology.cells:
        pinned = set()
        if cell.cpu_policy not in (None, "shared"):
            pinned = set((cell.cpu_pinning or {}).values()) | set(cell.cpuset_reserved or ())
        size = cell.pagesize or SMALL
        pages = cell.memory * 1024 // size
        out.append({"cell": cell.id, "cpus": sorted(pinned),
                    "pages": {size: pages} if size > SMALL else {},
                    "small_pages": pages if size == SMALL else 0,
                    "memory_mb": cell.memory, "shared": len(cell.cpuset)})
    return out


def topology_view(cloud) -> dict:
    """Per server, the NUMA topologies Nova gave it: now, and the move's old and new.

    Nova decided these when it claimed (the scheduler's fit, the move claim),
    not when the resource tracker counted: they say which pCPUs and pages
    each consumer should hold in which host cell.
    """
    from nova import context, exception, objects
    ctx = context.get_admin_context()
    out = {}
    for server, uuid in sorted(cloud.servers.items()):
        try:
            inst = objects.Instance.get_by_uuid(
                ctx, uuid, expected_attrs=["numa_topology", "migration_context"])
        except exception.InstanceNotFound:  # deleted: it holds nothing
            continue
        mc = inst.migration_context
        out[server] = {"current": guest_cells(inst.numa_topology),
                       "old": guest_cells(mc.old_numa_topology) if mc else None,
                       "new": guest_cells(mc.new_numa_topology) if mc else None}
    return out


#: migration statuses Nova's resource tracker no longer counts (its in-progress query's complement)
OVER = ("confirmed", "reverted", "failed", "completed", "cancelled", "done", "error")


def latest_migration(cloud, server: str):
    """The server's most recent Migration object (from the database), or None."""
    from nova import context, objects
    migrations = objects.MigrationList.get_by_filters(
        context.get_admin_context(), {"instance_uuid": cloud.servers[server]})
    return max(migrations, key=lambda m: m.id) if migrations else None


def instance(ctx, uuid, attrs):
    """The instance as the database has it, or None once deleted."""
    from nova import exception, objects
    try:
        return objects.Instance.get_by_uuid(ctx, uuid, expected_attrs=attrs)
    except exception.InstanceNotFound:
        return None


def left_behind(cloud) -> list:
    """``(server, what, seen)`` for what a recovered move left: a server not at
    VERIFY_RESIZE keeps no task state, no migration context, no migration in
    progress; and one whose guest runs untouched where it was is not in ERROR,
    whether or not the failed move also left its migration context (that is
    reported apart, above: a kept context must not hide the ERROR)."""
    from nova import context
    from nova.compute import vm_states
    ctx = context.get_admin_context()
    out = []
    for server, uuid in sorted(cloud.servers.items()):
        inst = instance(ctx, uuid, ["migration_context"])
        if inst is None or inst.vm_state == vm_states.RESIZED:  # gone, or at VERIFY_RESIZE
            continue
        migration = latest_migration(cloud, server)
        if inst.task_state is not None:
            out.append((server, "task_state", inst.task_state))
        if inst.migration_context is not None:
            out.append((server, "migration context", f"set (migration "
                        f"{inst.migration_context.migration_id})"))
        if migration is not None and migration.status not in OVER:
            out.append((server, "migration status", migration.status))
        if (inst.vm_state == vm_states.ERROR and inst.task_state is None
                and unmoved(inst, migration)
                and running_on(cloud, inst.name) == [inst.host]):
            out.append((server, "vm_state", f"error (its guest runs untouched on {inst.host}, "
                        f"where its move started)"))
    return out


def unmoved(inst, migration) -> bool:
    """Whether the instance is where and what its latest move started from: its host
    the move's source and its flavor the old one (one host: only the flavor tells)."""
    if migration is None:
        return True
    return (inst.host == migration.source_compute
            and inst.instance_type_id == migration.old_instance_type_id)


def running_on(cloud, domain: str) -> list:
    """The hosts whose fake libvirt runs the domain named ``domain``."""
    return [h.name for h in cloud.scenario.hosts
            if domain in cloud.libvirt_host(h.name).state()["running"]]


def consumers(cloud) -> dict:
    """Placement consumers of every server: its instance and its latest migration."""
    out = {}
    for server, uuid in sorted(cloud.servers.items()):
        out[f"{server} instance"] = uuid
        migration = latest_migration(cloud, server)
        if migration is not None:
            out[f"{server} migration"] = migration.uuid
    return out


def snapshot(cloud) -> dict:
    """All three views at once, for convergence comparisons and reports."""
    from harness.oracles import pci_views
    hosts = [h.name for h in cloud.scenario.hosts]
    held = consumers(cloud)
    out = {
        "rt": {h: rt_view(cloud, h) for h in hosts},
        "placement": placement_view(cloud, held),
        "truth": {h: truth_view(cloud, h) for h in hosts},
        "numa": topology_view(cloud),
    }
    pci = pci_views.snapshot(cloud, held)
    if pci is not None:  # only a scenario whose hosts declare PCI devices
        out["pci"] = pci
    return out
