"""The logs oracle names why a periodic failed, not only that it did."""
import itertools
import types

from harness.oracles import checks

PERIODIC_FAILED = """\
2026-11-30 17:48:30,248 ERROR [nova.compute.manager] Error updating resources for node host-b.
Traceback (most recent call last):
  File "nova/compute/manager.py", line 11084, in _update_available_resource_for_node
    self.rt.update_available_resource(context, nodename,
  File "nova/objects/numa.py", line 97, in pin_cpus
    raise exception.CPUPinningUnknown(requested=list(cpus),
nova.exception.CPUPinningUnknown: CPU set to pin [5, 6] must be a subset of known CPU set [8, 9, 6, 7]
2026-11-30 17:48:30,294 INFO [placement.requestlog] GET /placement/allocations
"""


def test_a_failed_periodic_is_reported_with_the_exception_under_it():
    found = checks.logs_clean(types.SimpleNamespace(log_text=PERIODIC_FAILED))
    assert [f.where for f in found] == ["log lines matching 'Error updating resources for node'"]
    assert found[0].seen == ["2026-11-30 17:48:30,248 ERROR [nova.compute.manager] Error updating "
                             "resources for node host-b. <- CPUPinningUnknown: CPU set to pin "
                             "[5, 6] must be a subset of known CPU set [8, 9, 6, 7]"]


def test_a_line_without_a_traceback_is_reported_as_it_is():
    line = "2026-11-30 17:48:30,248 ERROR [nova.compute.manager] CPUUnpinningInvalid: CPU set to unpin"
    found = checks.logs_clean(types.SimpleNamespace(log_text=line))
    assert [f.seen for f in found] == [[line]]


def test_a_clean_log_has_no_finding():
    assert checks.logs_clean(types.SimpleNamespace(log_text="INFO all fine\n")) == []


def test_a_failed_item_keeps_novas_warnings_and_errors_with_their_causes():
    from harness.execute.runner import warnings_in
    text = ("2026-11-30 17:48:30,100 INFO [nova.compute.manager] fine\n"
            "2026-11-30 17:48:30,200 WARNING [nova.virt.libvirt.driver] disk file was removed\n"
            + PERIODIC_FAILED)
    assert warnings_in(text) == [
        "2026-11-30 17:48:30,200 WARNING [nova.virt.libvirt.driver] disk file was removed",
        "2026-11-30 17:48:30,248 ERROR [nova.compute.manager] Error updating resources for node "
        "host-b. <- CPUPinningUnknown: CPU set to pin [5, 6] must be a subset of known CPU set "
        "[8, 9, 6, 7]"]
    assert len(warnings_in("".join(f"2026-11-30 17:48:30,200 WARNING [x] {w}\n"
                                   for w in itertools.product("abcdefgh", "xyz")), most=20)) == 20
    # a run of one warning (a late heartbeat per service) takes one line, not forty
    late = ("2026-11-30 19:05:04,88{} WARNING [oslo.service.backend._common.loopingcall] "
            "Function 'DbDriver._report_state' run outlasted interval by 3.8{} sec\n")
    assert warnings_in("".join(late.format(i, 9 - i) for i in range(4))) == [
        late.format(0, 9).strip() + " (and 3 more like it)"]
