"""The placement fault: the compute's placement request at the point answers 409
(a concurrent update) or 503 (placement unreachable); Nova's own status handling
runs; a move that failed is checked against the database's ledger, its servers
deleted and checked again, and a move that absorbed the error runs its ending.

On clean Nova 34 a conflict on the source's delete of the migration's allocation
at confirm leaks that allocation for good (Nova logs that it does: a reviewed
root cause), while a 503 on the destination's first allocation read is taken
for "none" and the move passes: the fault can be absorbed, and a pass is then a
proof.
"""
import json

import pytest

from harness import faults
from harness.execute.item import Item
from harness.errors import UsageError
from harness.scenario import load
from tests.conftest import cli

CONFIRM_DELETE = "source:SchedulerReportClient.delete_allocation_for_instance>placement.PUT#1"
READ = "dest:SchedulerReportClient.get_allocs_for_consumer>placement.GET#1"


def test_it_strikes_the_calling_hosts_requests_and_conflicts_only_writes():
    scen, both = load("pinned-hugepages"), ["source", "dest", "both"]
    conflict, down = faults.parse("placement:409"), faults.parse("placement:503")
    assert conflict.strikes(scen, CONFIRM_DELETE, both) == ["source"]
    assert conflict.strikes(scen, READ, both) == []  # a GET has nothing to conflict with
    assert down.strikes(scen, READ, both) == ["dest"]
    assert down.strikes(scen, "source:ComputeManager._resize_instance>Instance.save#1", both) == []
    item = Item("pinned-hugepages", CONFIRM_DELETE, "source", "confirm", window="lifecycle",
                fault="placement:409")
    assert Item.parse(item.id) == item and item.id.endswith("/fault=placement:409")
    # what conflicted, as placement words it: Nova gives up on a consumer's, retries a provider's
    from harness.faults.placement import conflict
    assert conflict("/allocations/some-uuid") == "consumer generation conflict"
    assert conflict("/resource_providers/rp/inventories") == "resource provider generation conflict"
    for bad in ("placement", "placement:500", "placement:409:1"):
        with pytest.raises(UsageError, match="unknown fault .*placement:409, placement:503"):
            faults.parse(bad)


def test_an_unknown_status_is_one_line_at_the_command_line():
    proc = cli("run", "pinned-hugepages", "--fault", "placement:500", "--list")
    assert proc.returncode == 2 and "placement:500" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("mode", ["fork", "fresh"])
def test_a_conflict_leaks_the_confirmed_migration_s_allocation(tmp_path, mode):
    report = tmp_path / "placement.json"
    proc = cli("run", "pinned-hugepages", "--fault", "placement:409", "--window", "lifecycle",
               "--point", CONFIRM_DELETE, "--ending", "confirm", "--mode", mode, "--jobs", "2",
               "--json", str(report))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (leaked,) = json.loads(report.read_text())["items"]
    assert leaked["fired"] == ["host-a (placement.PUT answered 409)"]
    assert leaked["verdict"] == "known", leaked["problems"][:4]
    assert leaked["causes"]["bit"] == ["placement-confirm-migration-allocation-delete-fails"]
    seen = {(f["checkpoint"], f["check"], f["where"]) for f in leaked["findings"]}
    assert {("after-failure", "placement", "allocations of vm1 migration"),
            ("after-delete", "placement", "host-a provider usages")} <= seen


def test_an_error_nova_absorbs_passes(tmp_path):
    """The destination's prep_resize reads the instance's allocations through the legacy
    call, which takes a 503 for none: the claim goes on, the move ends as if nothing
    happened -- a pass, which is then a proof."""
    report = tmp_path / "placement.json"
    proc = cli("run", "pinned-hugepages", "--fault", "placement:503", "--window", "lifecycle",
               "--point", READ, "--ending", "revert", "--jobs", "2", "--json", str(report))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (absorbed,) = json.loads(report.read_text())["items"]
    assert absorbed["fired"] == ["host-b (placement.GET answered 503)"]
    assert absorbed["verdict"] == "pass", absorbed["problems"][:4]
