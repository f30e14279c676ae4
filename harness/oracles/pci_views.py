"""Read the PCI views, as plain data: Nova's PCI tracker, placement's PCI
providers, the fake hosts' hostdevs.

Only a scenario whose hosts declare PCI devices has them (``snapshot["pci"]``);
every device and consumer is named by the server it serves (not a uuid), so
two runs' snapshots compare and findings read as the ledger does.

* tracker: each host's ``PciDevice`` records (status, the server, kind,
  vendor:product, cell, parent PF) and its ``ComputeNode.pci_device_pools``
  (free devices per vendor:product and cell) -- what the scheduler believes;
* placement: per PCI provider (``<host>_<ADDR>``, a child of the host's) its
  inventory and usages, and each consumer's allocations on it;
* truth: per host, the addresses the running and the defined domains hold.
"""
from __future__ import annotations


def names(cloud) -> dict:
    """instance uuid -> server name (a uuid the run did not boot stays a uuid)."""
    return {uuid: server for server, uuid in cloud.servers.items()}


def tracker_view(cloud, host: str) -> dict:
    from nova import context, objects
    ctx = context.get_admin_context()
    cn = objects.ComputeNode.get_by_host_and_nodename(ctx, host, host)
    who = names(cloud)
    devices = {}
    for dev in objects.PciDeviceList.get_by_compute_node(ctx, cn.id):
        devices[dev.address] = {
            "status": dev.status, "server": who.get(dev.instance_uuid, dev.instance_uuid),
            "kind": dev.dev_type.replace("type-", ""),
            "device": f"{dev.vendor_id}:{dev.product_id}", "cell": dev.numa_node,
            "parent": dev.parent_addr}
    pools = {}
    for pool in cn.pci_device_pools or ():
        key = f"{pool.vendor_id}:{pool.product_id} cell {pool.numa_node}"
        pools[key] = pools.get(key, 0) + pool.count
    return {"devices": dict(sorted(devices.items())), "pools": dict(sorted(pools.items()))}


def placement_pci_view(cloud, consumers: dict) -> dict:
    """``consumers``: name ("vm1 instance") -> uuid. Per PCI provider (by name):
    inventory totals and usages; per consumer: provider name -> resources."""
    api = cloud.env.placement
    providers = {}  # uuid -> name
    for h in cloud.scenario.hosts:
        root = cloud.rp_uuid(h.name)
        body = api.get(f"/resource_providers?in_tree={root}", version="1.14").body
        providers.update({rp["uuid"]: rp["name"] for rp in body["resource_providers"]
                          if rp["uuid"] != root})
    out = {"providers": {}, "allocations": {}}
    for uuid, name in sorted(providers.items(), key=lambda kv: kv[1]):
        inv = api.get(f"/resource_providers/{uuid}/inventories").body["inventories"]
        use = api.get(f"/resource_providers/{uuid}/usages").body["usages"]
        out["providers"][name] = {"inventory": {rc: i["total"] for rc, i in sorted(inv.items())},
                                  "usages": {rc: n for rc, n in sorted(use.items()) if n}}
    for kind, consumer in sorted(consumers.items()):
        body = api.get(f"/allocations/{consumer}", version="1.28").body
        held = {providers[rp]: dict(sorted(a["resources"].items()))
                for rp, a in body["allocations"].items() if rp in providers}
        if held:
            out["allocations"][kind] = dict(sorted(held.items()))
    return out


def truth_pci_view(cloud, host: str) -> dict:
    """Addresses the host's running and defined domains hold, -> server name."""
    conn = cloud.libvirt_host(host)
    by_name = {}
    for server, uuid in cloud.servers.items():
        by_name[_domain_name(conn, uuid)] = server
    def held(per_cell):
        return {addr: by_name.get(dom, dom) for cell in per_cell.values()
                for addr, dom in sorted(cell["pci"].items())}
    return {"running": held(conn.ground_truth()), "defined": held(conn.defined_claims())}


def _domain_name(conn, uuid: str) -> str | None:
    for dom in conn._vms.values():
        if dom.UUIDString() == uuid:
            return dom.name()
    return None


def snapshot(cloud, consumers: dict) -> dict | None:
    """The three PCI views and what the ledger needs of the config, or None without PCI."""
    pci = cloud.scenario.pci
    if pci is None:
        return None
    hosts = [h.name for h in cloud.scenario.hosts]
    return {
        "aliases": {name: dict(a) for name, a in sorted(pci.aliases.items())},
        "in_placement": {h: pci.per_host.get(h, {}).get("report_in_placement", pci.in_placement)
                         for h in hosts},
        "tracker": {h: tracker_view(cloud, h) for h in hosts},
        "placement": placement_pci_view(cloud, consumers),
        "truth": {h: truth_pci_view(cloud, h) for h in hosts},
    }
