"""The fault an item injects is part of its id, checked like the rest of it."""
import json
import os
import re

import pytest

from harness.errors import UsageError
from harness.execute.item import Item
from harness import faults
from tests.conftest import ROOT, cli


def test_a_split_item_id_round_trips_and_the_default_fault_is_not_written():
    item = Item("evacuate", "dest:A>b#1", "dest", "source-restart", fault="split:2")
    assert item.id == "evacuate/dest:A>b#1/dest/source-restart/fault=split:2"
    assert Item.parse(item.id) == item
    plain = Item("evacuate", "dest:A>b#1", "dest", "source-restart")
    assert plain.id == "evacuate/dest:A>b#1/dest/source-restart"


@pytest.mark.parametrize("fault", ["split:0", "split:x", "splat", "split:"])
def test_an_unknown_fault_is_one_line_naming_it(fault):
    with pytest.raises(UsageError, match=f"unknown fault '{fault}'"):
        Item.parse(f"evacuate/dest:A>b#1/dest/source-restart/fault={fault}")


def test_each_fault_answers_for_itself():
    periodic, split, split3, restart = map(faults.parse, ("periodic", "split", "split:3", "restart"))
    assert [f.pause_calls for f in (periodic, split, split3, restart)] == [None, 1, 3, None]
    assert [f.implicit for f in (periodic, split, restart)] == [True, False, False]
    assert [f.periodic for f in (periodic, split, restart)] == [True, True, False]
    assert [f.one_thread for f in (periodic, split, restart)] == [False, False, True]
    assert [f.memoizable for f in (periodic, split, restart)] == [True, True, False]
    assert faults.periodic_globs() == ["periodic", "split*"]
    assert [str(f) for f in (periodic, split3)] == ["periodic", "split:3"]
    assert all(k.summary and k.glob for k in faults.KINDS)
    assert faults.help_text().count(": ") >= len(faults.KINDS)


def test_only_the_fault_modules_know_which_fault_they_hold():
    """Whatever asks about a fault asks the fault (harness.faults.base.Fault): a new fault
    is its module and a line in the registry, not a branch at every site that cares."""
    asks = re.compile(r"""\bfault\s*(==|!=|not in|in)\s*\(?\s*["'](periodic|split|restart)"""
                      r"""|\bis_restart\b|split_distance|faults\.(RESTART|DEFAULT_FAULT)\b""")
    offenders = []
    for top, _, names in os.walk(os.path.join(ROOT, "harness")):
        if os.path.basename(top) == "faults":
            continue
        for name in (n for n in names if n.endswith(".py")):
            path = os.path.join(top, name)
            for no, line in enumerate(open(path), 1):
                if asks.search(line):
                    offenders.append(f"{os.path.relpath(path, ROOT)}:{no}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_a_split_on_both_hosts_finishes_both_in_fork_and_fresh_mode(tmp_path):
    """Two periodics stopped at one point: the first to finish has a checkpoint,
    which finishes the other first (measured: the other was then finished twice,
    and every split item on target both was an error). Fresh mode on the threads
    backend runs the per-node update in a pool thread, which could not hand the
    thread back: a split's own pool tasks run inline. The window's last point
    has no next one: both finish at the next checkpoint."""
    first = "source:_TrackingEndpointWrapper.__getattr__._tracked>InstanceActionEvent.event_start#1"
    last = "dest:notify_about_instance_action>notify.instance.resize_finish.end#1"
    for mode in ("fork", "fresh"):
        report = tmp_path / f"{mode}.json"
        proc = cli("run", "pinned-hugepages", "--fault", "split", "--point", first, "--point",
                   last, "--target", "both", "--ending", "confirm", "--mode", mode,
                   "--json", str(report))
        assert proc.returncode == 0, proc.stdout[-3000:]
        items = json.loads(report.read_text())["items"]
        assert len(items) == 2
        for item in items:
            assert item["verdict"] == "pass", item["problems"]
            assert sorted(f.split(" ")[0] for f in item["fired"]) == ["host-a", "host-b"]
            assert all("split: resumed at " in f for f in item["fired"]), item["fired"]
