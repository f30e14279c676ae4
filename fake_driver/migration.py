"""Live migration between fake hosts: a job during which both hosts really hold the guest.

Nova's fake libvirt fails every ``migrateToURI3`` (its functional tests stub
it per test). Here the source domain's job starts the guest on the
destination host (so the destination's pCPUs and pages are held from then
on, refused like libvirt on conflict) and stays in flight until Nova's
monitor first asks for its status; it then ends as the source host's
``job_outcome`` says:

* ``"complete"``: the source domain stops; it is undefined and the
  destination one made persistent as the job's flags ask
  (``VIR_MIGRATE_UNDEFINE_SOURCE``, ``VIR_MIGRATE_PERSIST_DEST``: Nova sets both);
* ``"fail"``: the destination domain is destroyed, the source runs on.

Which outcome an item gets is the harness's choice (a fault it sweeps), not
the fake's.
"""
from __future__ import annotations

import copy
import urllib.parse
import xml.etree.ElementTree as ET

OUTCOMES = ("complete", "fail")


def incoming_xml(source_xml: str, destination_xml: str) -> str:
    """The definition the destination starts: Nova's ``destination_xml`` (its
    pins and memory nodes rewritten for the destination) with what the fake
    ``XMLDesc`` it was made from leaves out copied from the source's own
    definition: the guest NUMA cells and the memory backing."""
    source, dest = ET.fromstring(source_xml), ET.fromstring(destination_xml)
    backing = source.find("./memoryBacking")
    if backing is not None and dest.find("./memoryBacking") is None:
        dest.append(copy.deepcopy(backing))
    numa = source.find("./cpu/numa")
    if numa is not None and dest.find("./cpu/numa") is None:
        cpu = dest.find("./cpu")
        if cpu is None:
            cpu = ET.SubElement(dest, "cpu")
        cpu.append(copy.deepcopy(numa))
    return ET.tostring(dest, encoding="unicode")


def peer_name(uri: str) -> str | None:
    """The host a migration URI (``qemu+tcp://host-b/system``) names."""
    return urllib.parse.urlparse(uri).hostname


class Job:
    """One live migration in flight from ``source`` (a domain) to ``dest`` (a host)."""

    def __init__(self, source, dest, incoming, flags: int):
        self.source, self.dest, self.incoming, self.flags = source, dest, incoming, flags

    def settle(self, outcome: str) -> int:
        """End the job as ``outcome``; returns the libvirt job type it ends in."""
        from nova.tests.fixtures import libvirt as fakelibvirt
        if outcome == "complete":
            self.source.destroy()
            if (self.flags & fakelibvirt.VIR_MIGRATE_UNDEFINE_SOURCE
                    and self.source.name() in self.source._connection._vms):
                self.source.undefine()
            if self.flags & fakelibvirt.VIR_MIGRATE_PERSIST_DEST:
                self.incoming._transient = False
            return fakelibvirt.VIR_DOMAIN_JOB_COMPLETED
        if outcome == "fail":
            if self.incoming.isActive():
                self.incoming.destroy()
            return fakelibvirt.VIR_DOMAIN_JOB_FAILED
        raise ValueError(f"job outcome {outcome!r}: expected one of {', '.join(OUTCOMES)}")
