"""The rpc fault: the message a compute sends at the point is lost -- a cast never
arrives, a call times out -- on the real oslo.messaging path; Nova's handling
runs; a move that failed or stalled is checked against the database's ledger,
its servers deleted and checked again, one that absorbed the loss runs its ending.

On clean Nova 34 a lost ``resize_instance`` cast leaves the server in
``resize_prep`` for good (no timeout in Nova ends it) and its delete leaves the
destination's claim and the migration's allocation on the source (a reviewed
root cause), while a timed-out
``check_instance_shared_storage`` call during a revert is handled (the storage is
taken as not shared) and the revert passes. So does it when the call ran and only
its reply was lost (``rpc:reply``): the source answered, nobody heard.
"""
import json

import pytest

from harness import faults
from harness.execute.item import Item
from harness.scenario import load
from tests.conftest import cli

LOST_CAST = "dest:ComputeManager._prep_resize>compute_rpc.resize_instance#1"
TIMED_OUT = ("dest:ComputeManager._is_instance_storage_shared>"
             "compute_rpc.check_instance_shared_storage#1")


def test_it_strikes_the_messages_the_calling_host_sends():
    rpc, scen, both = faults.parse("rpc"), load("pinned-hugepages"), ["source", "dest", "both"]
    assert rpc.strikes(scen, LOST_CAST, both) == ["dest"]
    assert rpc.strikes(scen, "dest:SchedulerQueryClient.update_instance_info>"
                             "scheduler_rpc.update_instance_info#1", both) == ["dest"]
    assert rpc.strikes(scen, "source:ComputeManager._resize_instance>Instance.save#1", both) == []
    assert rpc.strikes(scen, "dest:ComputeManager._finish_resize>driver.finish_migration#1",
                       both) == []
    item = Item("pinned-hugepages", LOST_CAST, "dest", "revert", window="lifecycle", fault="rpc")
    assert Item.parse(item.id) == item and item.id.endswith("/fault=rpc")


def test_only_methods_that_send_are_struck_and_a_lost_reply_only_where_one_is_awaited():
    rpc, reply = faults.parse("rpc"), faults.parse("rpc:reply")
    scen, both = load("live-migration"), ["source", "dest", "both"]
    # a version check: it sends nothing, so nothing of it can be lost
    check = ("source:ComputeManager._source_can_numa_live_migrate>"
             "compute_rpc.supports_numa_live_migration#1")
    assert rpc.strikes(scen, check, both) == [] == reply.strikes(scen, check, both)
    pre = ("source:ComputeManager._do_pre_live_migration_from_source>"
           "compute_rpc.pre_live_migration#1")
    assert rpc.strikes(scen, pre, both) == ["source"] == reply.strikes(scen, pre, both)
    # a cast has no reply to lose
    assert reply.strikes(load("pinned-hugepages"), LOST_CAST, both) == []
    assert Item.parse(Item("live-migration", pre, "source", "success",
                           fault="rpc:reply").id).fault == "rpc:reply"


def test_a_lost_reply_of_a_call_that_ran_is_handled(tmp_path):
    report = tmp_path / "reply.json"
    proc = cli("run", "pinned-hugepages", "--fault", "rpc:reply", "--window", "lifecycle",
               "--point", TIMED_OUT, "--ending", "revert", "--json", str(report))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (item,) = json.loads(report.read_text())["items"]
    assert item["fired"] == ["host-b (compute_rpc.check_instance_shared_storage reply lost)"]
    assert item["verdict"] == "pass", item["problems"][:4]


@pytest.mark.parametrize("mode", ["fork", "fresh"])
def test_a_lost_cast_strands_the_move_and_a_timed_out_call_is_handled(tmp_path, mode):
    report = tmp_path / "rpc.json"
    proc = cli("run", "pinned-hugepages", "--fault", "rpc", "--window", "lifecycle",
               "--point", LOST_CAST, "--point", TIMED_OUT, "--ending", "revert",
               "--mode", mode, "--jobs", "2", "--json", str(report))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    items = {i["id"].split("/")[1]: i for i in json.loads(report.read_text())["items"]}
    lost, handled = items[LOST_CAST], items[TIMED_OUT]
    assert lost["fired"] == ["host-b (compute_rpc.resize_instance cast lost)"]
    assert lost["verdict"] == "known", lost["problems"][:4]
    assert lost["causes"]["bit"] == [
        "rpc-lost-resize-instance-stranded-dest-claim-and-migration-allocation-kept"]
    assert not [p for p in lost["problems"] if p["kind"] != "finding"], lost["problems"][:4]
    seen = {(f["checkpoint"], f["check"], f["where"], str(f["seen"])) for f in lost["findings"]}
    assert ("after-failure", "recovery", "server vm1 task_state after the failure",
            "'resize_prep'") in seen
    assert ("after-delete", "placement", "host-a provider usages",
            "{'DISK_GB': 1, 'MEMORY_MB': 1024, 'PCPU': 2}") in seen
    assert handled["fired"] == ["host-b (compute_rpc.check_instance_shared_storage call timed out)"]
    assert handled["verdict"] == "pass", handled["problems"][:4]
