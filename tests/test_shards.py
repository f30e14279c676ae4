"""Shards (``run --shard K/N``) and ``merge``: deterministic slices that join back whole."""
import json

from harness.execute import shards
from harness.execute.item import Item
from tests.conftest import cli


def _items(scenario="s", points=10, window="resize"):
    return [Item(scenario, f"dest:F>c#{p}", t, e, window=window)
            for p in range(1, points + 1) for t in ("source", "dest") for e in ("confirm", "revert")]


def test_the_slices_cover_the_plan_once_and_keep_a_point_and_its_neighbours_together():
    items = _items() + _items("t", 7, "lifecycle")
    slices = [shards.select(items, k, 3) for k in (1, 2, 3)]
    assert sorted(i.id for s in slices for i in s) == sorted(i.id for i in items)
    for one in slices:
        for group in ("s", "t"):  # every shard gets a run of consecutive points of every group
            points = sorted({int(i.point.split("#")[1]) for i in one if i.scenario == group})
            assert points and points == list(range(points[0], points[-1] + 1))
        per_point = {}
        for i in one:  # all of a point's targets and endings: one fork prefix
            per_point.setdefault(i.point, set()).add((i.target, i.ending))
        assert all(len(v) == 4 for v in per_point.values())
    assert [shards.select(items, k, 3) for k in (1, 2, 3)] == slices  # deterministic


def test_recorded_durations_move_the_cut():
    items = _items(points=4)
    slow = {i.id: (30.0 if i.point.endswith("#1") else 1.0) for i in items}
    first = {i.point for i in shards.select(items, 1, 2, slow)}
    assert first == {"dest:F>c#1"}  # the slow point is a shard's worth on its own
    assert {i.point for i in shards.select(items, 1, 2)} == {"dest:F>c#1", "dest:F>c#2"}


def _shard_report(path, k, n, ids, planned, digest="d1"):
    meta = {"scenario": "s", "nova": "n", "backend": "threads", "mutation": None,
            "fault": "periodic", "campaigns": [], "seconds": 1.0, "fork_parents": [],
            "shard": {"index": k, "of": n, "planned": planned, "digest": digest}}
    items = [{"id": i, "verdict": "pass", "seconds": 1.0, "fired": [], "problems": [],
              "known": [], "findings": []} for i in ids]
    path.write_text(json.dumps({"meta": meta, "items": items}))
    return str(path)


def test_merge_refuses_a_missing_shard_a_doubled_item_and_another_plan(tmp_path):
    a = _shard_report(tmp_path / "a.json", 1, 2, ["s/p#1/dest/confirm"], 2)
    b = _shard_report(tmp_path / "b.json", 2, 2, ["s/p#2/dest/confirm"], 2)
    out = str(tmp_path / "m.json")
    proc = cli("merge", a, "--json", out)
    assert proc.returncode == 2 and "missing [2]" in proc.stderr, proc.stderr
    dup = _shard_report(tmp_path / "c.json", 2, 2, ["s/p#1/dest/confirm"], 2)
    proc = cli("merge", a, dup, "--json", out)
    assert proc.returncode == 2 and "in more than one shard" in proc.stderr, proc.stderr
    other = _shard_report(tmp_path / "d.json", 2, 2, ["s/p#2/dest/confirm"], 2, digest="d2")
    proc = cli("merge", a, other, "--json", out)
    assert proc.returncode == 2 and "another plan" in proc.stderr, proc.stderr
    short = _shard_report(tmp_path / "e.json", 2, 2, [], 2)
    proc = cli("merge", a, short, "--json", out)
    assert proc.returncode == 2 and "an item is missing" in proc.stderr, proc.stderr
    assert not (tmp_path / "m.json").exists()  # nothing half-written
    proc = cli("merge", a, b, "--json", out)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads((tmp_path / "m.json").read_text())["items"]) == 2


def test_two_shards_merged_give_the_campaign_s_verdicts(tmp_path):
    """Each shard runs its own slice (its own fork parent); merged, the verdicts are
    the ones these items have (tests/test_evacuate.py and the known findings)."""
    expected = {
        "dest:ComputeManager._rebuild_default_impl>driver.spawn#1": "pass",
        "dest:SchedulerQueryClient.update_instance_info>scheduler_rpc.update_instance_info#1":
            "known",
    }
    args = ["run", "evacuate", "--jobs", "2", *(a for p in expected for a in ("--point", p))]
    parts = []
    for k in (1, 2):
        part = tmp_path / f"shard{k}.json"
        proc = cli(*args, "--shard", f"{k}/2", "--json", str(part))
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert f"shard {k}/2: 1 of 2 items" in proc.stderr
        parts.append(str(part))
    merged = tmp_path / "merged.json"
    proc = cli("merge", *parts, "--json", str(merged), "--junit", str(tmp_path / "m.xml"))
    assert proc.returncode == 0, proc.stderr  # a known finding is no failure
    items = json.loads(merged.read_text())["items"]
    assert {i["id"].split("/")[1]: i["verdict"] for i in items} == expected
    assert (tmp_path / "m.xml").read_text().count("<testcase") == 2
