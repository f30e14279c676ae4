"""Shards (``run --shard K/N``) and ``merge``: deterministic slices that join back whole."""
import json
import os

import pytest

from harness.execute import shards
from harness.execute.item import Item
from tests.conftest import cli


def _items(scenario="s", points=10, window="resize"):
    return [Item(scenario, f"dest:F>c#{p}", t, e, window=window)
            for p in range(1, points + 1) for t in ("source", "dest") for e in ("confirm", "revert")]


def _trees(sizes: dict) -> list:
    """Items of one fork tree per scenario name, ``sizes[name]`` points each."""
    return [i for name, points in sizes.items() for i in _items(name, points)]


def _where(items, n, weights=None) -> dict:
    """tree key -> the shards holding its items."""
    cut = shards.assign(items, n, weights if weights is not None else {})
    out = {}
    for i in items:
        out.setdefault(shards.tree_key(i), set()).add(cut[i.id])
    return out


def test_more_trees_than_shards_deals_whole_trees_balanced_and_every_item_once():
    items = _trees({"a": 10, "b": 9, "c": 7, "d": 6, "e": 5, "f": 4, "g": 3, "h": 2})
    slices = [shards.select(items, k, 4, {}) for k in range(1, 5)]
    assert sorted(i.id for s in slices for i in s) == sorted(i.id for i in items)  # once each
    assert all(len(held) == 1 for held in _where(items, 4).values())  # whole trees
    loads = [len(s) for s in slices]  # 46 points of 4 items: ideal 46, LPT within a tree
    assert max(loads) - min(loads) <= 4 * 4, loads
    assert sorted(loads) == [44, 44, 48, 48], loads
    # deterministic: the same shards again, whatever order the weights were read in
    weights = {i.id: 1.0 for i in items}
    backwards = dict(reversed(list(weights.items())))
    assert [shards.select(items, k, 4, backwards) for k in range(1, 5)] == slices
    assert [shards.select(items, k, 4, weights) for k in range(1, 5)] == slices


def test_a_tree_heavier_than_a_share_is_cut_into_runs_of_consecutive_points():
    items = _trees({"big": 20, "b": 3, "c": 3, "d": 2})  # big: 80 of 112 items, a share is 37
    where = _where(items, 3)
    assert len(where["big|resize|periodic|-"]) == 3  # 80 / 37.3: three runs
    assert all(len(where[f"{t}|resize|periodic|-"]) == 1 for t in "bcd")
    for k in (1, 2, 3):
        mine = [int(i.point.split("#")[1]) for i in shards.select(items, k, 3, {})
                if i.scenario == "big"]
        points = sorted(set(mine))
        assert points == list(range(points[0], points[-1] + 1))  # consecutive: one prefix
        assert len(mine) == 4 * len(points)  # a point's targets and endings stay together


def test_fewer_trees_than_shards_leaves_no_shard_idle():
    items = _items() + _items("t", 7, "lifecycle")  # two trees, three shards
    slices = [shards.select(items, k, 3, {}) for k in (1, 2, 3)]
    assert all(slices) and sorted(i.id for s in slices for i in s) == sorted(i.id for i in items)
    assert sorted(len(v) for v in _where(items, 3).values()) == [1, 2]  # the heavier is cut


def test_measured_costs_decide_the_deal_and_an_unmeasured_tree_weighs_the_mean():
    items = _trees({"a": 5, "b": 5, "c": 5})  # equal in items
    slow = {i.id: (10.0 if i.scenario == "a" else 1.0) for i in items}
    where = _where(items, 2, slow)
    assert where["a|resize|periodic|-"] != where["b|resize|periodic|-"] == \
        where["c|resize|periodic|-"]  # a alone outweighs b and c together
    # c unmeasured: it weighs the mean measured item, (10 + 1) / 2 each
    partly = {i.id: w for i, w in zip(items, slow.values()) if i.scenario != "c"}
    weights = shards.item_weights(items, partly)
    assert {weights[i.id] for i in items if i.scenario == "c"} == {5.5}


def _report_of(path, items, parents):
    meta = {"seconds": 100.0, "fork_parents": parents}
    rows = [{"id": i.id, "seconds": 1.0 + n % 3, "verdict": "pass"} for n, i in enumerate(items)]
    path.write_text(json.dumps({"meta": meta, "items": rows}))
    return str(path)


def test_costs_are_each_tree_s_fork_parent_wall_and_the_cost_file_drives_the_default(
        tmp_path, monkeypatch):
    items = _trees({"a": 3, "b": 3}) + _items("a", 3, "lifecycle")
    parents = [{"scenario": "a", "window": "resize", "fault": "periodic", "mutation": None,
                "seconds": 30.0},
               {"scenario": "a", "window": "resize", "fault": "periodic", "mutation": None,
                "seconds": 10.0},  # a second shard's part of the same tree: summed
               {"scenario": "b", "window": "resize", "fault": "periodic", "mutation": None,
                "seconds": 5.0}]  # a|lifecycle has no parent line: its items' seconds
    report = _report_of(tmp_path / "r.json", items, parents)
    out = tmp_path / "costs.json"
    proc = cli("costs", report, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    trees = json.loads(out.read_text())["trees"]
    assert trees["a|resize|periodic|-"] == {"seconds": 40.0, "items": 12}
    assert trees["b|resize|periodic|-"] == {"seconds": 5.0, "items": 12}
    assert trees["a|lifecycle|periodic|-"]["items"] == 12
    # --durations: each tree's wall shared among its items by their own seconds
    per_item = shards.durations(report)
    assert round(sum(v for k, v in per_item.items() if k.startswith("b/")), 6) == 5.0
    # the default weights are the repository's cost file
    monkeypatch.setattr(shards, "COSTS_FILE", str(out))
    assert shards.item_weights(items, None)[items[0].id] == 40.0 / 12
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    proc = cli("costs", str(bad), "--out", str(tmp_path / "x.json"))
    assert proc.returncode == 2 and "not a nova-chaos JSON report" in proc.stderr


def test_the_repository_s_cost_file_covers_the_full_campaign_s_trees():
    trees = shards.load_costs()
    assert trees and all(t["seconds"] > 0 and t["items"] > 0 for t in trees.values())


def _ci():
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "bench", "ci_dry_run.py")
    spec = importlib.util.spec_from_file_location("ci_dry_run", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_ci_definitions_run_the_readme_s_commands_with_shard_k_of_n(tmp_path):
    ci = _ci()
    github, zuul = ci.github_commands(), ci.zuul_commands()
    n = len(github["shards"])
    assert n == 4 and github == zuul == ci.readme_commands(n)
    assert github["shards"][2] == [
        "python3 -m tox -e full -- --shard 3/4 --json reports/shard-3.json"]
    # the check fires: a README whose command drifted, a merge job missing a shard
    readme = tmp_path / "README.md"
    with open(os.path.join(ci.ROOT, "README.md")) as fh:
        readme.write_text(fh.read().replace("--json reports/shard-K.json", "--json shard-K.json"))
    assert ci.readme_commands(n, str(readme)) != github
    with open(ci.ZUUL) as fh:
        zuul_text = fh.read()
    broken = tmp_path / "zuul.yaml"
    broken.write_text(zuul_text.replace("      - nova-chaos-shard-4\n\n", "\n", 1))
    with pytest.raises(ValueError, match="must depend on every shard job"):
        ci.zuul_commands(str(broken))
    # as run locally: tox.ini's env, this checkout's harness, the scope for the campaign
    argv = ci.local(github["shards"][0][0], "evacuate", str(tmp_path))
    assert argv[1:] == ["-m", "harness", "run", "evacuate", "--jobs", "auto", "--json",
                        "reports/full.json", "--junit", "reports/full.xml", "--shard", "1/4",
                        "--json", "reports/shard-1.json"]


def _shard_report(path, k, n, ids, planned, digest="d1", partition="p1"):
    meta = {"scenario": "s", "nova": "n", "backend": "threads", "mutation": None,
            "fault": "periodic", "campaigns": [], "seconds": 1.0, "fork_parents": [],
            "shard": {"index": k, "of": n, "planned": planned, "digest": digest,
                      "partition": partition}}
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
    cut = _shard_report(tmp_path / "f.json", 2, 2, ["s/p#2/dest/confirm"], 2, partition="p2")
    proc = cli("merge", a, cut, "--json", out)
    assert proc.returncode == 2 and "cut the plan otherwise" in proc.stderr, proc.stderr
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
