"""Opt-in mutations: deliberately broken Nova, applied at run time, for self-tests.

A mutation is a fixture that re-creates a known defect in whatever Nova is
loaded, so the harness can prove its oracles fire at the right points.
``needs_fault = True`` marks one whose defect shows only under an injected
fault (:func:`discovered_as`). An
upstream one is the reverse of its fix, made at run time on the smallest
piece of Nova the fix changed; ``bug`` links it, ``operation`` says which
scenarios it can show in (``nova-chaos mutations`` lists them).
"""
from __future__ import annotations

import fixtures

from harness.cloud import pci_mutations
from harness.errors import HarnessError, UnknownChoice


class Bug1944759(fixtures.Fixture):
    """Undo the fix for bug 1944759: the source flips host/node without old_flavor.

    Before the fix, ``_resize_instance`` saved ``instance.host`` = destination
    without ``old_flavor``; only the destination's ``finish_resize`` stored it.
    We intercept that one save (``expected_task_state=RESIZE_MIGRATING``) and
    drop the ``old_flavor`` assignment the fix added, so the database holds no
    old flavor until the destination saves it.
    """

    description = "source flips instance.host before old_flavor is stored (pre-fix Nova)"
    bug = "https://bugs.launchpad.net/nova/+bug/1944759"
    operation = "resize"

    needs_fault = True

    def _setUp(self):
        from nova.compute import task_states
        from nova.objects import instance as instance_obj
        real_save = instance_obj.Instance.save

        def save(inst, *args, **kwargs):
            if (kwargs.get("expected_task_state") == task_states.RESIZE_MIGRATING
                    and "old_flavor" in inst.obj_what_changed()):
                inst.old_flavor = None  # what the database held before the fix
            return real_save(inst, *args, **kwargs)
        save.remotable = True
        self.useFixture(fixtures.MonkeyPatch("nova.objects.instance.Instance.save", save))


class Bug1845146(fixtures.Fixture):
    """Undo the fix for bug 1845146 (6ec686c26b): the periodic skips 'accepted' migrations.

    The conductor creates a live migration's record as 'accepted'; the
    destination claims for it in ``check_can_live_migrate_destination`` and
    the status stays 'accepted' until the source's ``live_migration`` queues
    it. Before the fix the periodic's in-progress query left 'accepted' out,
    so a destination periodic in that stretch dropped the claim (the
    instance is still the source's). Nova 34's periodic reads
    ``MigrationList.get_in_progress_and_error``; we filter 'accepted' from
    what it returns, as the old query did.
    """

    description = "the periodic ignores 'accepted' live migrations: the destination drops its claim"
    bug = "https://bugs.launchpad.net/nova/+bug/1845146"
    operation = "live-migration"

    needs_fault = True

    def _setUp(self):
        from nova.objects import migration as migration_obj
        real = migration_obj.MigrationList.get_in_progress_and_error

        def get_in_progress_and_error(cls, context, host, node):
            found = real(context, host, node)
            found.objects = [m for m in found if m.status != "accepted"]
            return found
        get_in_progress_and_error.remotable = True  # still a yield point to the tracer
        self.useFixture(fixtures.MonkeyPatch(
            "nova.objects.migration.MigrationList.get_in_progress_and_error",
            classmethod(get_in_progress_and_error)))


class Bug1849165(fixtures.Fixture):
    """Undo the fix for bug 1849165 (80385a22ee): a tracked migration without a context.

    The fix made ``_populate_assigned_resources`` skip a tracked migration
    whose instance has no migration context yet (``if not mig_ctx:
    continue``); before it, the ``'old_resources' in mig_ctx`` test on that
    host raised TypeError and the whole periodic failed (logged only). We
    raise what that test raised, then let Nova's own method run. With the
    libvirt driver a NUMA live migration claims (and gets its context)
    before the migration names its destination, so the window is at its
    end: the context is dropped in the database while the instance is still
    MIGRATING -- on success between ``drop_migration_context`` and the save
    of the host in ``post_live_migration_at_destination``, on rollback
    between the source's ``drop_migration_context`` and its save -- and only
    the destination tracks such a migration.
    """

    description = "a periodic tracking a migration whose context is gone fails with TypeError"
    bug = "https://bugs.launchpad.net/nova/+bug/1849165"
    operation = "live-migration"

    needs_fault = True

    def _setUp(self):
        from nova.compute import resource_tracker
        real = resource_tracker.ResourceTracker._populate_assigned_resources

        def populate(tracker, context, instance_by_uuid):
            for migration in tracker.tracked_migrations.values():
                context_of = migration.instance.migration_context
                if not context_of and tracker.host in (migration.source_compute,
                                                       migration.dest_compute):
                    "old_resources" in context_of  # noqa: B015 - TypeError, as before the fix
            return real(tracker, context, instance_by_uuid)
        self.useFixture(fixtures.MonkeyPatch(
            "nova.compute.resource_tracker.ResourceTracker._populate_assigned_resources",
            populate))


class Bug2025480(fixtures.Fixture):
    """Undo the fix for bug 2025480 (f1dc4ec39b): a spawning unshelve's claim may be removed.

    The fix made ``vm_states.allow_resource_removal`` keep an instance that
    is SHELVED_OFFLOADED but already SPAWNING on its new host; before it
    every SHELVED_OFFLOADED instance's usage could be removed, so a
    destination periodic between the unshelve's claim and its save to ACTIVE
    dropped the claim. The resource tracker and its stats read the helper
    at call time; we put the old rule back.
    """

    description = "a periodic while an unshelve spawns drops the destination's claim"
    bug = "https://bugs.launchpad.net/nova/+bug/2025480"
    operation = "unshelve"

    needs_fault = True

    def _setUp(self):
        from nova.compute import vm_states

        def allow_resource_removal(vm_state, task_state=None):
            return vm_state in (vm_states.DELETED, vm_states.SHELVED_OFFLOADED)
        self.useFixture(fixtures.MonkeyPatch(
            "nova.compute.vm_states.allow_resource_removal", allow_resource_removal))


class Bug1791075(fixtures.Fixture):
    """Undo the fix for bug 1791075 (d8f7638d02): rebuild task states are not "resizing".

    An evacuation's claim is tracked through its migration, and the
    periodic counts a migration only while its instance is resizing
    (``_instance_in_resize_state``); the fix added the rebuild task states
    (rebuilding, its block-device mapping, spawning) to that test. Before
    it a destination periodic between the rebuild's claim and its save to
    task_state None skipped the migration and dropped the claim, so a later
    evacuation could be given the same pCPUs. We put the old test back.
    """

    description = "a periodic during an evacuation's rebuild drops the destination's claim"
    bug = "https://bugs.launchpad.net/nova/+bug/1791075"
    operation = "evacuate"

    needs_fault = True

    def _setUp(self):
        from nova.compute import task_states, vm_states

        def in_resize_state(instance):
            return (instance.vm_state == vm_states.RESIZED
                    or (instance.vm_state in (vm_states.ACTIVE, vm_states.STOPPED)
                        and instance.task_state in task_states.resizing_states))
        self.useFixture(fixtures.MonkeyPatch(
            "nova.compute.resource_tracker._instance_in_resize_state", in_resize_state))


class Bug1896463(fixtures.Fixture):
    """Undo the fix for bug 1896463 (7675964af8): an evacuation finishes outside the RT lock.

    The fix moved the evacuation's last steps -- apply the migration
    context, set the host, save, drop the context, mark the migration
    'done' -- into ``ResourceTracker.finish_evacuation`` under the
    ``compute_resources`` lock. Before it they ran without the lock, so a
    destination periodic that had read its instances (not this one: still
    the source's) and not yet its migrations could see the host flipped and
    the context dropped, and counted the guest in neither: the bug's
    interleaving needs a periodic stopped between its reads
    (``--fault split:2``). In Nova 34 a whole periodic there shows the same
    loss, since the rebuild has already saved task_state None (the known
    evacuate gap) and is no longer deferred past the save. We run the same
    steps after the lock, not under it: the lock is still asked for and
    released first, so the calls (the yield points) are the fixed Nova's
    and discovery's trace still holds.
    """

    description = "an evacuation sets the host and drops its context outside the RT lock"
    bug = "https://bugs.launchpad.net/nova/+bug/1896463"
    operation = "evacuate"

    needs_fault = True

    def _setUp(self):
        from nova.compute import resource_tracker
        locked = resource_tracker.ResourceTracker.finish_evacuation
        unlocked = getattr(locked, "__wrapped__", None)  # functools.wraps under the lock
        if unlocked is None:
            raise HarnessError("mutation 1896463: this Nova's finish_evacuation has no "
                               "unlocked body to run (__wrapped__)")
        from nova import utils
        held_then_released = utils.synchronized(resource_tracker.COMPUTE_RESOURCE_SEMAPHORE,
                                                fair=True)(lambda tracker: None)

        def finish_evacuation(tracker, instance, node, migration):
            held_then_released(tracker)
            return unlocked(tracker, instance, node, migration)
        self.useFixture(fixtures.MonkeyPatch(
            "nova.compute.resource_tracker.ResourceTracker.finish_evacuation", finish_evacuation))


class Bug1818914(fixtures.Fixture):
    """Undo the fix for bug 1818914 (ad9f37350a): a move claim is dropped only if tracked.

    Before the fix ``_drop_move_claim`` removed a move's usage only for a
    migration its tracker tracked. A source tracks its outgoing migration
    only once a periodic of its own has run during the move, so a confirm
    with no periodic in between left the old flavor's pinned CPUs and pages
    counted on the source; one periodic before the confirm hid it (Nova's
    own recreate, ``test_resize_confirm_assert_hypervisor_usage_no_periodics``,
    runs none for that reason). We pass no flavor for an untracked
    instance, as the old code had none to drop: the uninjected confirm run
    fails, and only items whose periodic ran on the source pass.
    """

    description = "a confirm drops the source's usage only if a periodic tracked the migration"
    bug = "https://bugs.launchpad.net/nova/+bug/1818914"
    operation = "resize"

    def _setUp(self):
        from nova.compute import resource_tracker
        real = resource_tracker.ResourceTracker._drop_move_claim

        def drop(tracker, context, instance, nodename, flavor=None, prefix="new_"):
            if instance["uuid"] not in tracker.tracked_migrations:
                flavor = None  # nothing tracked, nothing to drop
            return real(tracker, context, instance, nodename, flavor, prefix=prefix)
        self.useFixture(fixtures.MonkeyPatch(
            "nova.compute.resource_tracker.ResourceTracker._drop_move_claim", drop))


class Bug2044235(fixtures.Fixture):
    """Undo the fix for bug 2044235 (dc51a4271b): the source check's failure escapes as it came.

    The destination's ``check_can_live_migrate_destination`` calls the
    source's ``check_can_live_migrate_source``; the fix wraps anything that
    call raises in ``MigrationPreCheckError``, which the conductor handles
    (the server stays ACTIVE). Before it the exception escaped as it came: a
    ``MessagingTimeout`` crossing the conductor's call arrives as
    ``RemoteError`` (``harness.faults.rpc.as_delivered``), which the
    conductor's ``except MessagingTimeout`` misses, so its catch-all puts
    the instance in ERROR though nothing touched its guest. We re-raise the
    exception the fix wrapped (its ``__context__``) when the destination's
    check ends in the fix's own ``MigrationPreCheckError``; the handlers
    inside the method run as in the fixed Nova (the instance fault it
    records names the wrapper).
    """

    description = "the source check's failure escapes the destination unwrapped: the server goes ERROR"
    bug = "https://bugs.launchpad.net/nova/+bug/2044235"
    operation = "live-migration"

    needs_fault = True

    def _setUp(self):
        from nova import exception
        from nova.compute import manager
        real = manager.ComputeManager.check_can_live_migrate_destination

        def check_can_live_migrate_destination(compute, ctxt, *args, **kwargs):
            try:
                return real(compute, ctxt, *args, **kwargs)
            except exception.MigrationPreCheckError as exc:
                escaped = exc.__context__
                if escaped is None or "check_can_live_migrate_source" not in str(exc):
                    raise
                raise escaped from None  # what left the method before the fix
        self.useFixture(fixtures.MonkeyPatch(
            "nova.compute.manager.ComputeManager.check_can_live_migrate_destination",
            check_can_live_migrate_destination))


class Bug2000069(fixtures.Fixture):
    """Undo the fix for bug 2000069 (a87b80fb39): a failed post-migration at the destination is swallowed.

    ``_post_live_migration`` on the source calls the destination's
    ``post_live_migration_at_destination``; the fix re-raises what that call
    raised, so ``_post_live_migration_update_host`` (bug 1628606's fix) sets
    the host to the destination and ``_do_live_migration`` puts the instance
    and the migration in ERROR. Before it the source logged the failure and
    carried on: the migration 'completed', its source allocation deleted,
    while a destination that never ran left the instance MIGRATING on the
    source though its guest runs on the destination. The source's only
    caller of that RPC method is this one; we make the method log and
    return, as the old ``except`` did (the call, its yield point, runs inside).
    """

    description = "the source swallows a failed post_live_migration_at_destination: MIGRATING on the source"
    bug = "https://bugs.launchpad.net/nova/+bug/2000069"
    operation = "live-migration"

    needs_fault = True

    def _setUp(self):
        from nova.compute import manager, rpcapi
        real = rpcapi.ComputeAPI.post_live_migration_at_destination

        def post_live_migration_at_destination(api, ctxt, instance, block_migration, host):
            try:
                return real(api, ctxt, instance, block_migration, host)
            except Exception as error:
                manager.LOG.exception("Post live migration at destination %s failed",
                                      host, instance=instance, error=error)
        self.useFixture(fixtures.MonkeyPatch(
            "nova.compute.rpcapi.ComputeAPI.post_live_migration_at_destination",
            post_live_migration_at_destination))


class Bug1628606(fixtures.Fixture):
    """Undo the fix for bug 1628606 (8449b7caef): a failed post-migration keeps the source as host.

    The fix hands the libvirt driver ``_post_live_migration_update_host`` as
    the post-migration callback: when ``_post_live_migration`` raises (the
    guest already runs on the destination) it applies and drops the
    migration context and saves the destination as the instance's host
    before re-raising. Before it the callback was ``_post_live_migration``
    itself, so a destination that never ran its half (its
    ``post_live_migration_at_destination`` lost) left ``_do_live_migration``
    to put the instance in ERROR on the source, with the migration context
    still set, while its guest runs on the destination. We make the wrapper
    the plain call.
    """

    description = "a failed post-migration leaves the instance on the source host (ERROR), guest on the dest"
    bug = "https://bugs.launchpad.net/nova/+bug/1628606"
    operation = "live-migration"

    needs_fault = True

    def _setUp(self):
        def update_host(compute, ctxt, instance, dest, block_migration=False,
                        migrate_data=None, source_bdms=None):
            compute._post_live_migration(ctxt, instance, dest, block_migration, migrate_data,
                                         source_bdms)
        self.useFixture(fixtures.MonkeyPatch(
            "nova.compute.manager.ComputeManager._post_live_migration_update_host",
            update_host))


class RevertKeepsDest(fixtures.Fixture):
    """Self-test sabotage (no upstream bug): a revert leaves the destination's usage counted.

    The destination's ``drop_move_claim_at_dest`` marks the migration
    reverted but drops nothing, so right after the revert its tracker
    still holds the new flavor's pinned CPUs and pages (the next periodic
    heals it). Confirm and auto-confirm never take that path: only the
    uninjected revert run fails (a finding without any injection, reported
    first), and the other endings are still swept.
    """

    description = "self-test: a revert leaves the destination counting the new flavor"
    bug = None
    operation = "resize"

    def _setUp(self):
        from nova.compute import resource_tracker, task_states
        real = resource_tracker.ResourceTracker._drop_move_claim

        def drop(tracker, context, instance, nodename, flavor=None, prefix="new_"):
            if prefix == "new_" and instance.task_state == task_states.RESIZE_REVERTING:
                return None
            return real(tracker, context, instance, nodename, flavor, prefix=prefix)
        self.useFixture(fixtures.MonkeyPatch(
            "nova.compute.resource_tracker.ResourceTracker._drop_move_claim", drop))


class VanishOnConfirm(fixtures.Fixture):
    """Self-test sabotage (no upstream bug): a Nova that crashes the ending.

    Once any ``update_available_resource`` has run, the source's
    ``confirm_resize`` deletes the instance instead of confirming, so the
    API forgets the server while the harness waits for it to go ACTIVE. An
    uninjected run never calls the periodic before its ending, so discovery
    is clean; every confirm item whose injection ran before the confirm must
    come out ``error`` (it never reaches its after-confirm checkpoint) in
    every mode -- never ``pass`` on the checkpoints it did reach.
    """

    description = "self-test: the server vanishes mid-confirm once a periodic ran"
    bug = None
    operation = "resize"

    needs_fault = True

    def _setUp(self):
        from nova.compute import manager
        real_periodic = manager.ComputeManager.update_available_resource
        real_confirm = manager.ComputeManager.confirm_resize
        state = {"periodic": False}

        def periodic(compute, *args, **kwargs):
            state["periodic"] = True
            return real_periodic(compute, *args, **kwargs)

        def confirm_resize(compute, context, instance, migration):
            if state["periodic"]:
                instance.destroy()
                return None
            return real_confirm(compute, context, instance=instance, migration=migration)

        self.useFixture(fixtures.MonkeyPatch(
            "nova.compute.manager.ComputeManager.update_available_resource", periodic))
        self.useFixture(fixtures.MonkeyPatch(
            "nova.compute.manager.ComputeManager.confirm_resize", confirm_resize))


class ExtraRead(fixtures.Fixture):
    """Self-test (no defect): a harmless extra call inside a known root cause's window.

    ``_finish_resize`` reads the instance's block device mappings once more,
    right after ``apply_migration_context`` and before
    ``setup_networks_on_host`` -- inside the window where the destination's
    periodic counts the old flavor (root cause ``dest-counts-old-flavor``).
    Nothing is written: a Nova developer's unrelated patch. The campaign must
    judge it as clean Nova: the new point's items are that cause, as their
    neighbours are, and nothing fails (issue 30).
    """

    description = "self-test: one harmless extra read in _finish_resize (a neutral Nova change)"
    bug = None
    operation = "resize"

    def _setUp(self):
        import sys

        from nova import objects
        from nova.objects import instance as instance_obj
        real = instance_obj.Instance.apply_migration_context

        def apply_migration_context(inst):
            real(inst)
            if _nova_caller(sys._getframe(1)) == "_finish_resize":
                objects.BlockDeviceMappingList.get_by_instance_uuid(inst._context, inst.uuid)
        self.useFixture(fixtures.MonkeyPatch(
            "nova.objects.instance.Instance.apply_migration_context", apply_migration_context))


def _nova_caller(frame) -> str | None:
    """The name of the innermost Nova function on the stack (the harness wraps calls)."""
    while frame is not None:
        if "/nova/" in frame.f_code.co_filename:
            return frame.f_code.co_name
        frame = frame.f_back
    return None


class StrayThread(fixtures.Fixture):
    """Self-test sabotage (no upstream bug): a Nova that leaves a thread of its own running.

    On the threads backend a fork parent must have no thread but its own
    (harness.cloud.one_thread): forking this one would copy a process whose other
    thread's work is lost mid-air. Every item must come out ``error``
    naming the thread -- never a hang, never a pass.
    """

    description = "self-test: a stray thread lives beside Nova (threads backend fork refuses)"
    bug = None
    operation = "any"

    needs_fault = True

    def _setUp(self):
        import threading
        stop = threading.Event()
        thread = threading.Thread(target=stop.wait, name="selftest-stray", daemon=True)
        thread.start()
        self.addCleanup(thread.join, 5)
        self.addCleanup(stop.set)


MUTATIONS = {"1944759": Bug1944759, "1845146": Bug1845146, "1849165": Bug1849165,
             "2025480": Bug2025480, "1791075": Bug1791075, "1896463": Bug1896463,
             "1818914": Bug1818914, "2044235": Bug2044235, "2000069": Bug2000069,
             "1628606": Bug1628606,
             "selftest-vanish": VanishOnConfirm, "selftest-revert-keeps-dest": RevertKeepsDest,
             "selftest-stray-thread": StrayThread, "selftest-extra-read": ExtraRead}
MUTATIONS.update(pci_mutations.MUTATIONS)  # upstream PCI bugs (issue 34, item 4)


#: upstream failure-path bugs reviewed and not re-introduced: bug -> why not in-process
#: (``nova-chaos mutations`` lists them after the mutations)
NOT_REPRODUCED = {
    "1949808": "aborting a queued live migration leaked its allocations (fixed by 219520d9ce, in "
               "Nova 34): the leak is in live_migration_abort's queued branch, reached only by "
               "the abort API (DELETE /servers/{id}/migrations/{id}) while the migration is "
               "queued; the harness has no abort operation",
    "1960412": "the same fix (219520d9ce) and the same path as 1949808 (the queued abort left "
               "the instance's state and port bindings): needs the abort API step",
    "1899835": "a failed pre_live_migration's rollback disconnected the destination's volumes "
               "with the source's connection_info (fixed by 5a55a78d51, in Nova 34): the "
               "scenarios boot servers without volumes, so the rollback has no BDM to mismatch, "
               "and Cinder attachments are not among the views the oracles read",
    "1848343": "deleting a server during a move that then fails (NoValidHost, or its dest's "
               "prep_resize) re-creates the deleted instance's allocations when the migration's "
               "are reverted -- not fixed (the FIXME in Nova 34's test_bug_1848343 asserts the "
               "leak): it needs the delete to land between the conductor's allocation swap and "
               "its revert; the harness deletes only once Nova has handled the failure (the "
               "revert is done) and has no fault that deletes at a point, so it does not apply "
               "on clean Nova 34 with these faults",
}
NOT_REPRODUCED.update(pci_mutations.NOT_REPRODUCED)


def discovered_as(name: str | None) -> str | None:
    """The mutation discovery runs a campaign with ``name`` under.

    ``needs_fault``: reviewed to show only under an injected fault (its
    docstring says where), so its uninjected runs are clean Nova's and the
    campaign shares clean Nova's cached discovery (the fork parent still runs
    the mutated uninjected prefix and first ending, and must pass); any other
    mutation is discovered with it applied, so a defect it shows without any
    fault is the campaign's first finding.
    """
    if name is None or getattr(get(name), "needs_fault", False):
        return None
    return name


def get(name: str):
    if name not in MUTATIONS:
        raise UnknownChoice("mutation", name, MUTATIONS)
    return MUTATIONS[name]
