"""The driver fault: the manager's libvirt driver call at the point raises, Nova
handles it, the run checks what Nova left against the database's ledger, deletes
every server and checks that nothing is held.

On clean Nova 34 a source that fails ``migrate_disk_and_power_off`` leaves the
destination's move claim in its tracker (healed only by the destination's next
periodic) and the migration context on the instance: the reviewed root cause
``driver-resize-instance-fails-dest-claim-kept``; and it puts the server in ERROR
while its guest runs untouched on the source (``_error_out_instance_on_exception``):
``driver-resize-instance-fails-server-errored``. The same in fork and fresh mode.
"""
import json

import pytest

from harness import faults
from harness.execute import campaign
from harness.execute.item import Item
from harness.scenario import load
from tests.conftest import cli

SENDING = "source:ComputeManager._resize_instance>driver.migrate_disk_and_power_off#1"


def test_it_strikes_the_managers_driver_calls_on_the_host_making_them():
    driver, scen = faults.parse("driver"), load("pinned-hugepages")
    both = ["source", "dest", "both"]
    assert driver.strikes(scen, SENDING, both) == ["source"]
    assert driver.strikes(scen, "dest:ComputeManager._finish_resize>driver.finish_migration#1",
                          both) == ["dest"]
    # the resource tracker's driver reads are the periodic's, not the move's
    assert driver.strikes(scen, "dest:ResourceTracker._get_traits>driver.capabilities_as_traits#1",
                          both) == []
    assert driver.strikes(scen, "source:ComputeManager._resize_instance>Instance.save#1",
                          both) == []
    # nor where the libvirt driver cannot fail with a libvirt error
    assert driver.strikes(scen, "dest:ComputeManager._check_instance_exists>"
                                "driver.instance_exists#1", both) == []
    assert driver.strikes(scen, "dest:ComputeManager._do_rebuild_instance>driver.rebuild#1",
                          both) == []
    item = Item("pinned-hugepages", SENDING, "source", "confirm", fault="driver")
    assert Item.parse(item.id) == item and item.id.endswith("/fault=driver")


def test_a_call_every_ending_makes_the_same_way_is_one_item():
    save, destroy = ("dest:ComputeManager._finish_resize>Instance.save#1",
                     "dest:ComputeManager.revert_resize>driver.destroy#1")
    traces = {"confirm": [SENDING, save], "revert": [SENDING, destroy],
              "auto-confirm": [SENDING, save]}
    made = campaign.items(load("pinned-hugepages"), traces, fault="driver")
    # the failure ends the move: a call every ending makes the same way is one item
    assert [(i.point, i.target, i.ending) for i in made] == [(SENDING, "source", "confirm"),
                                                             (destroy, "dest", "revert")]
    for name in ("live-migration", "unshelve"):  # every operation: the recovery ledger knows them
        faults.parse("driver").refuse(load(name))


@pytest.mark.parametrize("mode", ["fork", "fresh"])
def test_a_failed_power_off_leaves_the_claim_the_context_and_an_error(tmp_path, mode):
    report = tmp_path / "driver.json"
    proc = cli("run", "pinned-hugepages", "--fault", "driver", "--point", SENDING,
               "--ending", "confirm", "--mode", mode, "--jobs", "2", "--json", str(report))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (item,) = json.loads(report.read_text())["items"]
    assert item["fired"] == ["host-a (driver.migrate_disk_and_power_off raised libvirtError)"]
    # Nova handled it: no API error reached the run, every planned checkpoint was reached
    assert item["verdict"] == "known", item["problems"][:4]
    assert item["causes"]["bit"] == ["driver-resize-instance-fails-dest-claim-kept",
                                     "driver-resize-instance-fails-server-errored"]
    assert not [p for p in item["problems"] if p["kind"] != "finding"], item["problems"][:4]
    seen = {(f["checkpoint"], f["check"], f["where"], str(f["seen"])) for f in item["findings"]}
    assert ("after-failure", "rt", "host-b pinned pCPUs", "4") in seen
    assert ("after-failure", "recovery", "server vm1 migration context after the failure",
            "'set (migration 1)'") in seen
    # the kept context does not hide the ERROR: the recovery oracle reports both
    assert ("after-failure", "recovery", "server vm1 vm_state after the failure",
            "'error (its guest runs untouched on host-a, where its move started)'") in seen
    assert not [f for f in item["findings"] if f["checkpoint"] == "after-delete"]
