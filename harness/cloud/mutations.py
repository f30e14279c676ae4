"""Opt-in mutations: deliberately broken Nova, applied at run time, for self-tests.

A mutation is a fixture that re-creates a known defect in whatever Nova is
loaded, so the harness can prove its oracles fire at the right points.
"""
from __future__ import annotations

import fixtures

from harness.errors import UnknownChoice


class Bug1944759(fixtures.Fixture):
    """Undo the fix for bug 1944759: the source flips host/node without old_flavor.

    Before the fix, ``_resize_instance`` saved ``instance.host`` = destination
    without ``old_flavor``; only the destination's ``finish_resize`` stored it.
    We intercept that one save (``expected_task_state=RESIZE_MIGRATING``) and
    drop the ``old_flavor`` assignment the fix added, so the database holds no
    old flavor until the destination saves it.
    """

    description = "source flips instance.host before old_flavor is stored (pre-fix Nova)"

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


class StrayThread(fixtures.Fixture):
    """Self-test sabotage (no upstream bug): a Nova that leaves a thread of its own running.

    On the threads backend a fork parent must have no thread but its own
    (harness.cloud.one_thread): forking this one would copy a process whose other
    thread's work is lost mid-air. Every item must come out ``error``
    naming the thread -- never a hang, never a pass.
    """

    description = "self-test: a stray thread lives beside Nova (threads backend fork refuses)"

    def _setUp(self):
        import threading
        stop = threading.Event()
        thread = threading.Thread(target=stop.wait, name="selftest-stray", daemon=True)
        thread.start()
        self.addCleanup(thread.join, 5)
        self.addCleanup(stop.set)


MUTATIONS = {"1944759": Bug1944759, "selftest-vanish": VanishOnConfirm,
             "selftest-stray-thread": StrayThread}


def get(name: str):
    if name not in MUTATIONS:
        raise UnknownChoice("mutation", name, MUTATIONS)
    return MUTATIONS[name]
