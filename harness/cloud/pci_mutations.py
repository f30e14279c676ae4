"""Upstream Nova PCI bugs re-introduced at run time (issue 34, item 4).

Each class undoes one upstream fix on the smallest piece of Nova 34 the fix
changed, like those in :mod:`harness.cloud.mutations` (which registers them).
``NOT_REPRODUCED`` records the PCI bugs reviewed and not built in, and why.
"""
from __future__ import annotations

import fixtures


def _wrap_drop_pci_devices(fixture, wrapper) -> None:
    """Replace ``ResourceTracker._drop_pci_devices`` with ``wrapper(real, tracker, instance,
    nodename, prefix)`` for ``fixture``'s life: the fix both bugs' reversals undo lives there."""
    from nova.compute import resource_tracker
    real = resource_tracker.ResourceTracker._drop_pci_devices

    def drop_pci_devices(tracker, instance, nodename, prefix):
        return wrapper(real, tracker, instance, nodename, prefix)
    fixture.useFixture(fixtures.MonkeyPatch(
        "nova.compute.resource_tracker.ResourceTracker._drop_pci_devices", drop_pci_devices))


class Bug1641750(fixtures.Fixture):
    """Undo the fix for bug 1641750 (3a4909ae7e): a move claim frees PCI devices only if tracked.

    Before the fix ``drop_move_claim`` freed the migration context's PCI
    devices only inside its branch for a migration its tracker tracked; the
    fix (now ``_drop_pci_devices``, called for any instance whose usage is
    dropped) also frees them for an instance the tracker does not track as
    migrating -- the source at a confirm, which tracks its outgoing
    migration only once a periodic of its own ran during the move. We make
    ``_drop_pci_devices`` do nothing for an untracked instance: a confirm
    with no source periodic in between leaves the old VF allocated on the
    source until the next periodic frees it.
    """

    description = "a confirm frees the source's PCI devices only if a periodic tracked the migration"
    bug = "https://bugs.launchpad.net/nova/+bug/1641750"
    operation = "resize"

    def _setUp(self):
        def drop_pci_devices(real, tracker, instance, nodename, prefix):
            if instance["uuid"] not in tracker.tracked_migrations:
                return None  # the old drop_move_claim had no branch for it
            return real(tracker, instance, nodename, prefix)
        _wrap_drop_pci_devices(self, drop_pci_devices)


class Bug1607219(fixtures.Fixture):
    """Undo the fix for bug 1607219 (3ca3a2d8ce): a revert frees the old PCI devices, not the new.

    ``drop_move_claim`` takes the prefix of the migration context's
    resources to drop: ``old_`` at a confirm (the source), ``new_`` at a
    revert (the destination). Before the fix its PCI part always read
    ``old_pci_devices``; on the destination those are the source's devices,
    which its tracker does not hold, so the revert left the destination's
    VF claimed for the reverted instance (until a periodic there freed it).
    We make ``_drop_pci_devices`` read ``old_`` whatever it is asked.
    """

    description = "a revert frees the old PCI devices, not the destination's new ones"
    bug = "https://bugs.launchpad.net/nova/+bug/1607219"
    operation = "resize"

    def _setUp(self):
        _wrap_drop_pci_devices(
            self, lambda real, tracker, instance, nodename, prefix:
            real(tracker, instance, nodename, "old_"))


class Bug1622854(fixtures.Fixture):
    """Undo the fix for bug 1622854 (6689c96cdf): a freed device stays in the tracker's mappings.

    ``PciDevTracker.free_device`` frees one device of a move (a confirm's
    old device on the source, a revert's new one on the destination); the
    fix also removes it from the tracker's ``allocations`` / ``claims``
    (``_remove_device_from_pci_mapping``). Before it the device was
    available again but still listed for the instance, so the next
    periodic's ``clean_usage`` freed it a second time: ``PciDevice.free``
    raises ``PciDeviceInvalidStatus`` and that node's periodic fails. We
    make the removal do nothing (``free_device`` is its only caller).
    """

    description = "a device freed by a move stays listed for the instance: the next periodic fails"
    bug = "https://bugs.launchpad.net/nova/+bug/1622854"
    operation = "resize"

    def _setUp(self):
        self.useFixture(fixtures.MonkeyPatch(
            "nova.pci.manager.PciDevTracker._remove_device_from_pci_mapping",
            lambda tracker, instance_uuid, pci_device, pci_mapping: None))


class Bug2103636(fixtures.Fixture):
    """Undo the fix for bug 2103636 (4e4262cd3d): a live migration's claim refuses flavor PCI.

    A live migration of a guest with a NUMA topology claims on the
    destination through ``MoveClaim``, whose ``_test_pci`` accepted only
    Neutron SR-IOV requests for a live migration ("Non-VIF related PCI
    requests are not supported for live migration"). Once flavor-based
    (live_migratable) devices could be live migrated the fix removed that
    override, so ``Claim._test_pci`` runs for every move. We put the
    override back: the pinned guest's live migration with its flavor VF is
    refused by the destination's claim.
    """

    description = "a NUMA guest's live migration with a flavor-based VF is refused by the dest's claim"
    bug = "https://bugs.launchpad.net/nova/+bug/2103636"
    operation = "live-migration"

    def _setUp(self):
        from nova import objects
        from nova.compute import claims

        def test_pci(claim):
            if not claim.migration.is_live_migration:
                return claims.Claim._test_pci(claim)
            for request in claim._pci_requests.requests or []:
                if request.source != objects.InstancePCIRequest.NEUTRON_PORT:
                    return "Non-VIF related PCI requests are not supported for live migration."
            return None
        self.useFixture(fixtures.MonkeyPatch("nova.compute.claims.MoveClaim._test_pci", test_pci))


MUTATIONS = {"1641750": Bug1641750, "1607219": Bug1607219, "1622854": Bug1622854,
             "2103636": Bug2103636}

#: upstream PCI bugs reviewed and not built in: bug -> why (``nova-chaos mutations`` lists them)
NOT_REPRODUCED = {
    "1860555": "an aborted instance claim was cleaned up on the Claim's copy (fixed by f8b98390dc, "
               "in Nova 34): the caller's in-memory instance kept its PCI devices and pinning, "
               "which only a reschedule carries to another host; the harness has no reschedule, "
               "and the reversal (abort on the copy, _free_device without the instance) passed "
               "where a claim is aborted (pci-unshelve, --fault driver at the spawn) and left "
               "pci-live-migration's endings as clean Nova's",
    "1986838": "two boots racing for a host's last device: the compute's PCI claim logged and "
               "returned no device (fixed by 2b447b7236, now PciDeviceRequestFailed and a "
               "reschedule): it needs two claims at once on one host and a reschedule; the "
               "harness runs one operation beside a periodic that never claims",
    "1941005": "a resize was scheduled with the old flavor's PCI request (fixed by a93092e0d5, "
               "compute/api.py resize recomputes request_spec.pci_requests): every PCI "
               "resize scenario keeps the alias (vf:1 -> vf:1), so the old request asks for the "
               "same device and scheduling cannot differ; it needs a flavor changing its alias",
    "1983753": "the same defect and fix as 1941005 (a93092e0d5): same reason",
    "2098496": "with PCI in placement a freed VF got a pool of its own (fixed by 229fb3513a, "
               "_find_pool ignores rp_uuid), so a later claim took a VF from each pool of the "
               "provider: it needs a claim on a host after a VF was freed there since its "
               "tracker started; in pci-vf-resize-placement and pci-evacuate every claim on a "
               "host precedes every free (the reversal's uninjected runs were clean Nova's); "
               "the same holds for 8911da6923 (no bug of its own: the claim followed which "
               "providers the allocation named, not how many devices from each), which also "
               "needs several devices requested over several PF providers, one VF here",
    "2115729": "PciDevTracker.save deleted only half of the removed devices (fixed by "
               "0208be629c): it needs devices to disappear from a host (hot-unplug or a "
               "[pci]device_spec change); the fake hosts keep their devices and no scenario "
               "reconfigures device_spec",
    "2115905": "a device removed from [pci]device_spec while in use left placement and the "
               "tracker (fixed by f37cdf0c41, 4495f1f019): needs a device_spec change between "
               "restarts; the harness restarts a compute with its configuration unchanged",
    "1969496": "a PF available in the database while its VFs stayed unavailable could not be "
               "claimed (fixed by 3af2ecc13f): needs that inconsistent table, left by devices "
               "that vanished (284ea72e96); the fake hosts' devices never vanish, and with "
               "consistent rows the fixed and unfixed claims are the same",
    "1944619": "a failed pre_live_migration's rollback re-attached SR-IOV ports at the source "
               "(fixed by 63ffba7496): the libvirt rollback_live_migration_at_source only "
               "re-attaches migrate_data.vifs (Neutron ports); the scenarios' VFs come from "
               "flavors and the servers have no ports",
    "1893221": "a live migration's PCI claim for SR-IOV ports ignored the guest's NUMA cells on "
               "the destination (fixed by 1273c5ee0b, in _claim_pci_for_instance_vifs): a port "
               "path; the scenarios' servers have no ports, and pci-live-migration's "
               "destination has one NUMA cell",
    "1549984": "Claim._test_pci claimed the devices while only testing, so a claim refused for "
               "another resource kept them (fixed by 66e79e1bbc): needs a claim that passes PCI "
               "and fails on CPUs or memory; every claim in the PCI scenarios succeeds and no "
               "fault makes one fail",
    "1633120": "a device_spec typo made the tracker delete allocated devices' rows (fixed by "
               "26c41eccad): needs a device_spec change at a restart; the harness restarts with "
               "the same configuration",
    "1892361": "a device whose type changed at a restart stayed in its old pool (fixed by "
               "b8695de6da): needs the hypervisor to report a changed device; the fake hosts' "
               "devices never change",
}
