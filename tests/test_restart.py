"""The restart fault: the host whose code runs at the point dies there, a new compute starts.

Nova 34 recovers from almost none of these (1836369, open): the recovery
oracle and the after-delete ledger must say so, with the same verdicts and
values in fork and fresh mode.
"""
import json
import types

import pytest

from harness.execute import campaign
from harness.execute.item import Item
from harness import faults
from tests.conftest import cli

#: Nova's own test_init_host restarts the source here (frozen thread, then a new service)
SOURCE_SENDING = "source:ComputeManager._resize_instance>driver.migrate_disk_and_power_off#1"
#: the destination has saved VERIFY_RESIZE: nothing is left half-done, the recovery is clean
DEST_DONE = "dest:notify_about_instance_action>notify.instance.resize_finish.end#1"


def test_a_restart_item_id_round_trips():
    item = Item("pinned-hugepages", SOURCE_SENDING, "source", "confirm", fault="restart")
    assert item.id.endswith("/source/confirm/fault=restart")
    assert Item.parse(item.id) == item
    assert faults.parse("restart").pause_calls is None and faults.parse("restart").kills


def test_a_restart_kills_the_host_whose_code_runs_once_per_point_before_the_endings_part():
    """A point every ending reaches the same way is one item (the ending never runs
    after a kill); a point of one ending's own steps is that ending's item. The
    target is the point's role: the thread that can be frozen there is its host's."""
    scen = types.SimpleNamespace(name="s", same_host=False, endings=("confirm", "revert"),
                                 operation=types.SimpleNamespace(targets=("source", "dest", "both")))
    traces = {"confirm": ["source:a#1", "dest:b#1", "source:c#1"],
              "revert": ["source:a#1", "dest:b#1", "dest:r#1", "source:c#1"]}
    got = [(i.point, i.target, i.ending) for i in
           campaign.items(scen, traces, ["source", "dest", "both"], ["confirm", "revert"],
                          fault="restart")]
    assert got == [("source:a#1", "source", "confirm"), ("dest:b#1", "dest", "confirm"),
                   ("source:c#1", "source", "confirm"), ("source:c#1", "source", "revert"),
                   ("dest:r#1", "dest", "revert")]
    periodic = campaign.items(scen, traces, ["source", "dest"], ["confirm", "revert"])
    assert len(periodic) == 2 * (3 + 4)


@pytest.mark.parametrize("args, says", [
    (("live-migration",), "fault restart: swept on resize, cold-migration and evacuate scenarios only"),
    (("pinned-hugepages", "--backend", "eventlet"), "fault restart needs the threads backend"),
])
def test_restart_is_refused_in_one_line_where_it_cannot_run(args, says):
    proc = cli("run", *args, "--fault", "restart", "--list")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert says in proc.stderr and "Traceback" not in proc.stderr


def test_a_source_killed_while_sending_leaves_the_move_half_done_in_fork_and_fresh_mode(tmp_path):
    """1836369 where Nova's own test_init_host puts it: the new source's init_host
    reverts the guest and clears the task state, but the migration stays
    'migrating' with its context set, and after the delete the migration's
    allocation on the source is orphaned. Both modes: the same verdict, the same values."""
    seen = {}
    for mode in ("fork", "fresh"):
        report = tmp_path / f"{mode}.json"
        # fork mode: also a point Nova recovers from, which must pass (the oracles can)
        more = ("--point", DEST_DONE) if mode == "fork" else ()
        proc = cli("run", "pinned-hugepages", "--fault", "restart", "--point", SOURCE_SENDING,
                   *more, "--mode", mode, "--json", str(report))
        assert proc.returncode in (0, 1), proc.stderr[-3000:]
        items = {i["id"].split("/")[1]: i for i in json.loads(report.read_text())["items"]}
        if mode == "fork":
            done = items.pop(DEST_DONE)
            assert done["verdict"] == "pass", done["problems"]
            assert done["fired"] == ["host-b (killed, restarted)"]
        (item,) = items.values()
        assert item["id"].endswith(f"{SOURCE_SENDING}/source/confirm/fault=restart")
        assert item["fired"] == ["host-a (killed, restarted)"]
        findings = {(f["checkpoint"], f["check"], f["where"], f["seen"]) for f in item["findings"]}
        assert ("after-restart", "recovery", "server vm1 migration status after the restart",
                "'migrating'") in findings, findings
        assert ("after-restart", "recovery", "server vm1 migration context after the restart",
                "'set (migration 1)'") in findings, findings
        assert any(f[:3] == ("after-delete", "placement", "host-a provider usages")
                   for f in findings), findings
        seen[mode] = (item["verdict"], sorted(findings), item["causes"]["bit"])
    assert seen["fork"] == seen["fresh"]
    # the reviewed root cause (1836369), value for value
    assert seen["fork"][0] == "known" and seen["fork"][2] == ["restart-source-in-resize-instance"]
