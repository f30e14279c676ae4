"""Every wait in the cloud driver is bounded, and hitting the bound says where it stuck."""
import time

import pytest

from harness.cloud.inprocess import Cloud
from harness.errors import ScenarioFailed


def cloud_with(servers, timeout=0.3):
    """A Cloud whose API answers from ``servers`` (a list consumed one status at a time)."""
    cloud = Cloud.__new__(Cloud)
    cloud.timeout = timeout
    cloud.server = lambda name: servers.pop(0) if len(servers) > 1 else servers[0]
    return cloud


def test_wait_returns_once_the_status_is_reached_and_no_task_runs():
    cloud = cloud_with([{"status": "RESIZE", "OS-EXT-STS:task_state": "resize_finish"},
                        {"status": "VERIFY_RESIZE", "OS-EXT-STS:task_state": "resize_finish"},
                        {"status": "VERIFY_RESIZE", "OS-EXT-STS:task_state": None}])
    assert cloud.wait_for("vm1", ("VERIFY_RESIZE",), "resize vm1")["status"] == "VERIFY_RESIZE"


def test_wait_past_its_bound_is_a_failure_naming_the_state_it_stuck_in():
    cloud = cloud_with([{"status": "RESIZE", "OS-EXT-STS:task_state": "resize_migrating"}])
    started = time.monotonic()
    with pytest.raises(ScenarioFailed, match=r"resize vm1: server vm1 is RESIZE \(task_state "
                                             r"resize_migrating\), expected VERIFY_RESIZE"):
        cloud.wait_for("vm1", ("VERIFY_RESIZE",), "resize vm1")
    assert time.monotonic() - started < 5


def test_error_state_ends_the_wait_at_once_with_the_fault():
    cloud = cloud_with([{"status": "ERROR", "fault": {"message": "CPUUnpinningInvalid"}}], timeout=60)
    started = time.monotonic()
    with pytest.raises(ScenarioFailed, match="is ERROR.*fault: CPUUnpinningInvalid"):
        cloud.wait_for("vm1", ("ACTIVE",), "confirm vm1")
    assert time.monotonic() - started < 5


def test_a_poll_that_never_finishes_is_reported():  # delete waits this way (importing Nova here would not mix with xdist)
    cloud = Cloud.__new__(Cloud)
    cloud.timeout = 0.2
    cloud.gone = lambda name: False
    with pytest.raises(ScenarioFailed, match="delete vm1: still there after 0s"):
        cloud._poll(lambda: cloud.gone("vm1"), lambda: f"delete vm1: still there after {cloud.timeout:.0f}s")


def test_time_the_process_was_held_still_is_not_charged_to_the_wait():
    """A fork parent holds its whole process while it forks and waits for slots:
    a wait's bound counts its polls, not the wall clock (eventlet live migration)."""
    cloud = Cloud.__new__(Cloud)
    cloud.timeout = 0.2  # four polls
    answers = [False, False, False, "done"]

    def ready():
        time.sleep(0.15)  # the process held still: more wall time than the whole bound
        return answers.pop(0)
    assert cloud._poll(ready, lambda: "stuck") == "done"
