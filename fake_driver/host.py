"""The fake libvirt host: a ``fakelibvirt.Connection`` that really holds resources.

Nova's fake libvirt tracks which domains exist and run, but not what they
occupy. :class:`FakeLibvirtHost` extends it: starting a domain claims the
pCPUs, hugepages and PCI devices its XML asks for (refused with a
libvirt-style error on conflict or exhaustion), stopping it releases exactly
that claim, and :meth:`FakeLibvirtHost.ground_truth` answers per cell what is
held and by whom (:meth:`FakeLibvirtHost.pci_truth`: per PCI device). The
PCI devices the topology declares are Nova's own fake ones
(``HostPCIDevicesInfo``), which the LibvirtDriver reads as node devices.
"""
from __future__ import annotations

import collections
import re

from nova.tests.fixtures import libvirt as fakelibvirt
from nova.virt.libvirt import config as vconfig

from fake_driver import migration
from fake_driver.domain_xml import Claim, parse_claim
from fake_driver.pci import split_address
from fake_driver.topology import HostTopology, format_cpu_set

_CREATION_TIME = re.compile(r"<nova:creationTime>[^<]*</nova:creationTime>")


def _error(msg: str, code=fakelibvirt.VIR_ERR_OPERATION_FAILED):
    return fakelibvirt.make_libvirtError(
        fakelibvirt.libvirtError, msg, error_code=code,
        error_domain=fakelibvirt.VIR_FROM_QEMU)


def capabilities_topology(topo: HostTopology) -> vconfig.LibvirtConfigCapsNUMATopology:
    """The ``<topology>`` of the host capabilities, built from ``topo``."""
    caps = vconfig.LibvirtConfigCapsNUMATopology()
    per_socket = topo.cores * topo.threads
    for cell in topo.cells:
        ccell = vconfig.LibvirtConfigCapsNUMACell()
        ccell.id = cell.id
        ccell.memory = cell.memory_mb * 1024
        for index, cpu_id in enumerate(cell.cpus):
            cpu = vconfig.LibvirtConfigCapsNUMACPU()
            cpu.id = cpu_id
            cpu.socket_id = cell.id * topo.sockets + index // per_socket
            cpu.core_id = (index % per_socket) // topo.threads
            first = cpu_id - index % topo.threads
            cpu.siblings = set(range(first, first + topo.threads))
            ccell.cpus.append(cpu)
        huge_kb = sum(size * n for size, n in cell.hugepages.items())
        pools = [(4, (ccell.memory - huge_kb) // 4)] + sorted(cell.hugepages.items())
        ccell.mempages = fakelibvirt.create_mempages(pools)
        caps.cells.append(ccell)
    return caps


def host_info(topo: HostTopology) -> fakelibvirt.HostInfo:
    info = fakelibvirt.HostInfo(
        cpu_nodes=len(topo.cells), cpu_sockets=topo.sockets,
        cpu_cores=topo.cores, cpu_threads=topo.threads,
        kB_mem=sum(c.memory_mb for c in topo.cells) * 1024)
    info.numa_topology = capabilities_topology(topo)
    return info


#: iommu group of a host's first PCI device (Nova's fake starts at 40 too)
FIRST_IOMMU_GROUP = 40


def pci_info(topo: HostTopology) -> fakelibvirt.HostPCIDevicesInfo:
    """Nova's fake PCI devices for the topology's declared ones (none: an empty set)."""
    info = fakelibvirt.HostPCIDevicesInfo(num_pci=0, num_pfs=0, num_vfs=0)
    vfs = {pf: sum(1 for d in topo.pci if d.parent == pf) for pf in (d.address for d in topo.pci)}
    for group, dev in enumerate(topo.pci, FIRST_IOMMU_GROUP):
        bus, slot, function = dev.bus_slot_function
        # a VF's vf_ratio only places its PF's slot (slot - (vf_ratio + 1) // 8 in
        # Nova's fake): 0 keeps it in the VF's own slot, where fake_driver.pci puts it
        ratio = {"PF": vfs[dev.address], "VF": 0}.get(dev.kind)
        parent = split_address(dev.parent) if dev.parent else None
        info.add_device(dev_type=dev.kind, bus=bus, slot=slot, function=function,
                        iommu_group=group, numa_node=dev.numa_node, vf_ratio=ratio,
                        parent=parent, vend_id=dev.vendor_id, prod_id=dev.product_id)
    return info


class FakeDomain(fakelibvirt.Domain):
    """A domain that claims its pCPUs, hugepages and PCI devices while it runs."""

    def __init__(self, connection, xml, running=False, transient=False):
        self.raw_xml = xml  # the fake re-renders XMLDesc; keep what Nova wrote
        self.claim = connection.claim_of(xml)
        self.job = None  # a live migration in flight from here (fake_driver.migration)
        if running:
            connection.acquire(self)
        super().__init__(connection, xml, running=running, transient=transient)

    def createWithFlags(self, flags):
        if not self.isActive():
            self._connection.acquire(self)
        super().createWithFlags(flags)

    # -- live migration (fake_driver.migration) ----------------------------
    def migrateToURI3(self, dconnuri, params, flags):
        """Start the guest on the destination and leave the job in flight."""
        dest = self._connection.peers.get(migration.peer_name(dconnuri))
        if dest is None:
            raise _error(f"unable to connect to server at '{dconnuri}': no such fake host",
                         fakelibvirt.VIR_ERR_OPERATION_INVALID)
        xml = migration.incoming_xml(self.raw_xml, params["destination_xml"])
        incoming = dest.createXML(xml, 0)  # refused like libvirt if the destination is short
        self.job = migration.Job(self, dest, incoming, flags)
        self._job_type = fakelibvirt.VIR_DOMAIN_JOB_UNBOUNDED

    def jobStats(self, flags=0):
        """The first look at a job in flight ends it as the source host's ``job_outcome``.

        ``on_job_settle``, if the host has one, is called first: the harness
        checks the job in flight there and chooses the outcome (it may fork).
        """
        job = self.job
        if job is not None:
            self.job = None
            if self._connection.on_job_settle is not None:
                self._connection.on_job_settle()
            self._job_type = job.settle(self._connection.job_outcome)
        return super().jobStats(flags)


#: the libvirt and QEMU a host needs for live-migratable PCI devices (Nova's
#: MIN_VFIO_PCI_VARIANT_*; its own tests start such computes with these)
VFIO_VARIANT_LIBVIRT, VFIO_VARIANT_QEMU = (10, 0, 0), (8, 2, 2)


def _version(parts: tuple) -> int:
    return parts[0] * 1_000_000 + parts[1] * 1_000 + parts[2]


def _live_migratable_pci() -> bool:
    """Whether the cloud's ``[pci] device_spec`` tags a device ``live_migratable``:
    then its PCI hosts run a libvirt new enough (Nova refuses the compute otherwise)."""
    from nova import conf
    return any("live_migratable" in spec for spec in conf.CONF.pci.device_spec)


class FakeLibvirtHost(fakelibvirt.Connection):
    """One compute host's libvirt: topology, domains and what they hold."""

    def __init__(self, topology: HostTopology, dedicated: frozenset, peers=None, **kwargs):
        self.topology = topology
        self.dedicated = frozenset(dedicated)
        self._held: dict[str, tuple] = {}  # domain name -> (domain, claim)
        self.peers = peers if peers is not None else {}  # host name -> FakeLibvirtHost
        self.peers[topology.name] = self
        self.job_outcome = "complete"  # how live migrations from here end (fake_driver.migration)
        self.on_job_settle = None  # called as a job from here is about to end
        self.pci_devices = {d.address: d for d in topology.pci}
        kwargs.setdefault("pci_info", pci_info(topology))
        if topology.pci and _live_migratable_pci():
            kwargs.setdefault("version", _version(VFIO_VARIANT_LIBVIRT))
            kwargs.setdefault("hv_version", _version(VFIO_VARIANT_QEMU))
        super().__init__('qemu:///system', host_info=host_info(topology),
                         hostname=topology.name, **kwargs)

    # -- domain life cycle -------------------------------------------------
    def claim_of(self, xml: str) -> Claim:
        try:
            claim = parse_claim(xml, self.dedicated, self.topology.cell_of)
        except KeyError as exc:
            raise _error(f"host {self.topology.name}: pCPU {exc.args[0]} does not exist",
                         fakelibvirt.VIR_ERR_XML_DETAIL) from None
        except (ValueError, SyntaxError) as exc:
            raise _error(f"host {self.topology.name}: invalid domain XML: {exc}",
                         fakelibvirt.VIR_ERR_XML_DETAIL) from None
        return claim

    def acquire(self, dom: FakeDomain) -> None:
        """Hold ``dom``'s claim, or raise like libvirt when it cannot be met."""
        name = dom.name() if hasattr(dom, "_def") else _name_of(dom.raw_xml)
        pinned = self.pinned_by()
        for cell, cpus in dom.claim.cpus.items():
            taken = {cpu: pinned[cpu] for cpu in cpus if cpu in pinned and pinned[cpu] != name}
            if taken:
                raise _error(
                    f"host {self.topology.name}: cannot start domain '{name}': pCPU(s) "
                    f"{format_cpu_set(taken)} on cell {cell} already pinned by "
                    f"{', '.join(sorted(set(taken.values())))}")
        used = self.pages_used()
        for (cell, size), count in dom.claim.pages.items():
            total = self.topology.pages_total(cell, size)
            free = total - used[(cell, size)]
            if count > free:
                raise _error(
                    f"host {self.topology.name}: cannot start domain '{name}': needs {count} "
                    f"{size} KiB pages on cell {cell}, {free} of {total} free")
        self._check_pci(name, dom.claim.pci)
        self._held[name] = (dom, dom.claim)

    def _check_pci(self, name: str, addresses) -> None:
        """Refuse, like libvirt, a device the host lacks or another domain holds;
        a PF and its VFs exclude each other (a PF given to a guest takes its VFs)."""
        held = self.pci_held_by()
        for addr in sorted(addresses):
            dev = self.pci_devices.get(addr)
            if dev is None:
                raise _error(f"host {self.topology.name}: cannot start domain '{name}': "
                             f"PCI device {addr} not found", fakelibvirt.VIR_ERR_NO_NODE_DEVICE)
            related = [(addr, "")] + ([(dev.parent, f" (its PF {dev.parent})")] if dev.parent else [])
            related += [(d.address, f" (its VF {d.address})") for d in self.pci_devices.values()
                        if d.parent == addr]
            for other, why in related:
                if held.get(other, name) != name:
                    raise _error(f"host {self.topology.name}: cannot start domain '{name}': PCI "
                                 f"device {addr} is in use{why} by domain '{held[other]}'",
                                 fakelibvirt.VIR_ERR_OPERATION_INVALID)

    def _mark_not_running(self, dom):
        held = self._held.get(dom.name())
        if held and held[0] is dom:
            del self._held[dom.name()]
        super()._mark_not_running(dom)

    def defineXML(self, xml):
        running = self._vms.get(_name_of(xml))
        if running is not None and running.isActive():
            # libvirt: the running domain gets a persistent definition (used at its
            # next start) and keeps running with what it holds; a new stopped
            # domain object would leave that claim unreleasable
            running._transient = False
            running.raw_xml, running.claim = xml, self.claim_of(xml)
            running._def = running._parse_definition(xml)
            self._emit_lifecycle(running, fakelibvirt.VIR_DOMAIN_EVENT_DEFINED, 0)
            return running
        dom = FakeDomain(connection=self, running=False, transient=False, xml=xml)
        self._vms[dom.name()] = dom
        self._emit_lifecycle(dom, fakelibvirt.VIR_DOMAIN_EVENT_DEFINED, 0)
        return dom

    def createXML(self, xml, flags):
        dom = FakeDomain(connection=self, running=True, transient=True, xml=xml)
        self._vms[dom.name()] = dom
        self._emit_lifecycle(dom, fakelibvirt.VIR_DOMAIN_EVENT_STARTED, 0)
        return dom

    def getCPUMap(self):
        cpus = len(self.topology.cpus)
        return (cpus, [True] * cpus, cpus)

    # -- ground truth ------------------------------------------------------
    def pinned_by(self) -> dict:
        """pCPU -> name of the running domain that pins it exclusively."""
        return {cpu: name for name, (_, claim) in self._held.items()
                for cpus in claim.cpus.values() for cpu in cpus}

    def pci_held_by(self) -> dict:
        """PCI address -> name of the running domain that holds the device."""
        return {addr: name for name, (_, claim) in self._held.items() for addr in claim.pci}

    def pci_truth(self) -> dict:
        """Per declared PCI device: what it is, its cell, and the running domain
        holding it (None: free). ``{address: {"kind", "vendor_id", "product_id",
        "numa_node", "parent", "held_by"}}``"""
        held = self.pci_held_by()
        return {addr: {"kind": d.kind, "vendor_id": d.vendor_id, "product_id": d.product_id,
                       "numa_node": d.numa_node, "parent": d.parent, "held_by": held.get(addr)}
                for addr, d in sorted(self.pci_devices.items())}

    def pages_used(self) -> collections.Counter:
        used = collections.Counter()
        for _, claim in self._held.values():
            used.update(claim.pages)
        return used

    def ground_truth(self) -> dict:
        """Per cell: pinned pCPUs and hugepages used per size, by running domain.

        ``{cell: {"cpus": frozenset, "pages": {size_kb: n}, "memory_kb": n,
        "shared": n, "pci": {address: domain}, "by_domain": {name: {the same,
        for that domain; "pci" a frozenset of addresses}}}}``; pages include
        small (4 KiB) ones, ``shared`` counts floating vCPUs, ``pci`` the
        devices of the cell's ``numa_node``
        """
        return _per_cell(self.topology, {n: c for n, (_, c) in self._held.items()},
                         self.pci_devices)

    def defined_claims(self) -> dict:
        """Per cell, what every *defined* domain would hold if started.

        A resize source keeps its shut-off domain until confirm; this is what
        its resource tracker must keep reserved for a revert.
        """
        return _per_cell(self.topology, {d.name(): d.claim for d in self._vms.values()
                                         if isinstance(d, FakeDomain)}, self.pci_devices)

    def state(self) -> dict:
        """Every domain as plain data: its XML (but the wall-clock time Nova wrote in
        its metadata), whether it runs, is persistent, holds its claim, and the ids
        given so far (a memo key: :mod:`harness.execute.memo`)."""
        return {"next_id": self._id_counter, "job_outcome": self.job_outcome,
                "running": sorted(d.name() for d in self._running_vms.values()),
                "held": sorted(self._held),
                "domains": {name: {"xml": _CREATION_TIME.sub(
                                       "", getattr(d, "raw_xml", None) or d.XMLDesc(0)),
                                   "active": bool(d.isActive()),
                                   "transient": bool(getattr(d, "_transient", False)),
                                   "job": _job(getattr(d, "job", None))}
                            for name, d in sorted(self._vms.items())}}


def _job(job) -> dict | None:
    return None if job is None else {"dest": job.dest.topology.name, "flags": job.flags,
                                     "incoming": job.incoming.name()}


def _name_of(xml: str) -> str:
    import xml.etree.ElementTree as ET
    return ET.fromstring(xml).findtext("name", "?")


def _per_cell(topo: HostTopology, claims: dict, devices: dict) -> dict:
    out = {}
    for cell in topo.cells:
        by_domain = {}
        for name, claim in sorted(claims.items()):
            held = {"cpus": claim.cpus.get(cell.id, frozenset()),
                    "pages": {size: n for (c, size), n in claim.pages.items() if c == cell.id and n},
                    "memory_kb": claim.memory_kb.get(cell.id, 0),
                    "shared": claim.shared.get(cell.id, 0),
                    "pci": frozenset(a for a in claim.pci
                                     if a in devices and devices[a].numa_node == cell.id)}
            if any(held.values()):
                by_domain[name] = held
        pages = collections.Counter()
        for held in by_domain.values():
            pages.update(held["pages"])
        out[cell.id] = {
            "cpus": frozenset().union(*(h["cpus"] for h in by_domain.values())),
            "pages": dict(pages),
            "memory_kb": sum(h["memory_kb"] for h in by_domain.values()),
            "shared": sum(h["shared"] for h in by_domain.values()),
            "pci": {a: n for n, h in by_domain.items() for a in sorted(h["pci"])},
            "by_domain": by_domain,
        }
    return out
