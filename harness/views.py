"""Read the three independent views of resource usage, as plain data.

* resource tracker: each host's ``ComputeNode`` row as saved (``numa_topology``
  cells' ``pinned_cpus`` and ``mempages[*].used``, ``vcpus_used``,
  ``memory_mb_used``) -- where bug 1944759 loses data;
* placement: allocations per consumer (instance, migration) per provider,
  and each provider's usages;
* ground truth: what the fake libvirt hosts' domains really hold.

Snapshots are plain dicts of sorted lists so that two of them compare with
``==`` and print readably.
"""
from __future__ import annotations


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
                "pages": {m.size_kb: m.used for m in cell.mempages if m.size_kb > 4 and m.used},
            }
    return {"vcpus_used": cn.vcpus_used, "memory_mb_used": cn.memory_mb_used, "cells": cells}


def placement_view(cloud, consumers: dict) -> dict:
    """``consumers``: kind ("instance"/"migration") -> consumer uuid."""
    hosts = {cloud.rp_uuid(h.name): h.name for h in cloud.scenario.hosts}
    allocations = {}
    for kind, uuid in sorted(consumers.items()):
        body = cloud.env.placement.get(f"/allocations/{uuid}", version="1.28").body
        allocations[kind] = {hosts.get(rp, rp): dict(sorted(a["resources"].items()))
                             for rp, a in sorted(body["allocations"].items())}
    usages = {}
    for rp, host in sorted(hosts.items(), key=lambda kv: kv[1]):
        body = cloud.env.placement.get(f"/resource_providers/{rp}/usages").body
        usages[host] = {k: v for k, v in sorted(body["usages"].items()) if v}
    return {"allocations": allocations, "usages": usages}


def _plain(per_cell: dict) -> dict:
    return {cell: {"cpus": sorted(v["cpus"]), "pages": dict(sorted(v["pages"].items())),
                   "by_domain": {n: {"cpus": sorted(d["cpus"]), "pages": d["pages"]}
                                 for n, d in v["by_domain"].items()}}
            for cell, v in per_cell.items()}


def truth_view(cloud, host: str) -> dict:
    conn = cloud.libvirt_host(host)
    return {"running": _plain(conn.ground_truth()), "defined": _plain(conn.defined_claims())}


def consumers_of(cloud, server: str) -> dict:
    """Placement consumers of ``server``: the instance and its latest migration."""
    from nova import context, objects
    out = {"instance": cloud.servers[server]}
    migrations = objects.MigrationList.get_by_filters(
        context.get_admin_context(), {"instance_uuid": cloud.servers[server]})
    if migrations:
        out["migration"] = max(migrations, key=lambda m: m.id).uuid
    return out


def snapshot(cloud, server: str) -> dict:
    """All three views at once, for convergence comparisons and reports."""
    hosts = [h.name for h in cloud.scenario.hosts]
    return {
        "rt": {h: rt_view(cloud, h) for h in hosts},
        "placement": placement_view(cloud, consumers_of(cloud, server)),
        "truth": {h: truth_view(cloud, h) for h in hosts},
    }
