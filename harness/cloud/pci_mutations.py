"""Upstream Nova PCI bugs re-introduced at run time (issue 34, item 4).

Each class undoes one upstream fix on the smallest piece of Nova 34 the fix
changed, like those in :mod:`harness.cloud.mutations` (which registers them).
``NOT_REPRODUCED`` records the PCI bugs reviewed and not built in, and why.
"""
from __future__ import annotations

import sys

import fixtures


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
        from nova.compute import resource_tracker
        real = resource_tracker.ResourceTracker._drop_pci_devices

        def drop_pci_devices(tracker, instance, nodename, prefix):
            if instance["uuid"] not in tracker.tracked_migrations:
                return None  # the old drop_move_claim had no branch for it
            return real(tracker, instance, nodename, prefix)
        self.useFixture(fixtures.MonkeyPatch(
            "nova.compute.resource_tracker.ResourceTracker._drop_pci_devices",
            drop_pci_devices))


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
        from nova.compute import resource_tracker
        real = resource_tracker.ResourceTracker._drop_pci_devices

        def drop_pci_devices(tracker, instance, nodename, prefix):
            return real(tracker, instance, nodename, "old_")
        self.useFixture(fixtures.MonkeyPatch(
            "nova.compute.resource_tracker.ResourceTracker._drop_pci_devices",
            drop_pci_devices))


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


class Bug1860555(fixtures.Fixture):
    """Undo the fix for bug 1860555 (f8b98390dc): an aborted claim is cleaned up on a copy.

    ``Claim`` keeps a clone of the instance; the fix made ``abort`` hand the
    tracker the caller's instance (``instance_ref``) and made
    ``PciDevTracker.free_instance_allocations`` / ``free_instance_claims``
    pass the instance to ``_free_device``, so a freed device leaves
    ``instance.pci_devices``. Before it the abort cleared the clone's NUMA
    topology, host and node and the caller's instance kept its devices. We
    put both back: ``abort`` on the clone, ``_free_device`` without the
    instance when those two call it.
    """

    description = "an aborted instance claim is cleaned up on a copy: the caller keeps pinning and devices"
    bug = "https://bugs.launchpad.net/nova/+bug/1860555"
    operation = "unshelve"

    needs_fault = True

    def _setUp(self):
        from nova.compute import claims
        from nova.pci import manager

        def abort(claim):
            claim.tracker.abort_instance_claim(claim.context, claim.instance, claim.nodename)
        real_free = manager.PciDevTracker._free_device

        def free_device(tracker, dev, instance=None):
            if sys._getframe(1).f_code.co_name in ("free_instance_allocations",
                                                    "free_instance_claims"):
                instance = None  # what those two passed before the fix
            return real_free(tracker, dev, instance)
        self.useFixture(fixtures.MonkeyPatch("nova.compute.claims.Claim.abort", abort))
        self.useFixture(fixtures.MonkeyPatch("nova.pci.manager.PciDevTracker._free_device",
                                             free_device))
        del claims


class Bug2098496(fixtures.Fixture):
    """Undo the fix for bug 2098496 (229fb3513a): a freed VF makes a second pool for its PF.

    ``PciDeviceStats._find_pool`` matches a device put back in the stats
    (freed) to an existing pool; the fix drops the metadata tags (rp_uuid)
    from the pool's keys before comparing, so the VF rejoins its PF's pool.
    Before it the freed VF got a pool of its own with the same rp_uuid, and
    a later claim following a placement allocation took the requested count
    from every pool of that rp_uuid (more VFs than asked); the fix also
    added two guards in the claim (one pool per rp_uuid, an rp_uuid consumed
    once). We compare with the tags kept and lift both guards.
    """

    description = "with PCI in placement a freed VF gets its own pool: the next claim takes too many VFs"
    bug = "https://bugs.launchpad.net/nova/+bug/2098496"
    operation = "resize"

    def _setUp(self):
        import collections
        import types

        from nova.pci import stats

        def find_pool(pci_stats, dev_pool):
            for pool in pci_stats.pools:
                pool_keys = {k: v for k, v in pool.items() if k not in ("count", "devices")}
                if (len(pool_keys) == len(dev_pool)
                        and pci_stats._equal_properties(dev_pool, pool_keys, list(dev_pool))):
                    return pool
            return None

        class Counter(collections.Counter):
            def pop(self, key, *default):  # the rp_uuid stays requested
                return self.get(key, *default)
        old_collections = types.ModuleType("collections")
        old_collections.__dict__.update(vars(collections), Counter=Counter)
        self.useFixture(fixtures.MonkeyPatch("nova.pci.stats.PciDeviceStats._find_pool",
                                             find_pool))
        self.useFixture(fixtures.MonkeyPatch(
            "nova.pci.stats.PciDeviceStats._assert_one_pool_per_rp_uuid",
            staticmethod(lambda pools: True)))
        self.useFixture(fixtures.MonkeyPatch("nova.pci.stats.collections", old_collections))
        del stats


MUTATIONS = {"1641750": Bug1641750, "1607219": Bug1607219, "1622854": Bug1622854, "1860555": Bug1860555,
             "2098496": Bug2098496}

NOT_REPRODUCED: dict[str, str] = {}
