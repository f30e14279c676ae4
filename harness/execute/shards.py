"""Split a campaign over machines: ``--shard K/N`` picks the K-th of N shares, deterministically.

The unit is a *fork tree*: the items one fork parent serves (one scenario,
window, fault and mutation: the group :func:`harness.execute.fork.sweep`
runs as one :class:`~harness.execute.fork.ForkSweep`). Its items share the
boot, the move up to the first point and the memo's uninjected baseline;
its endings are forked from the one parent at VERIFY_RESIZE, so the ending
is no part of the key. A shard pays that set-up once per tree it holds, so
trees are dealt whole: longest first onto the lightest shard (LPT), ties by
tree key and shard number. Only a tree heavier than the ideal share (total
/ N), or the heaviest ones when there are fewer trees than shards, is cut
first into runs of consecutive points (a run shares the longest prefix), so
that no shard idles.

The costs are measured seconds kept in the repository (:data:`COSTS_FILE`,
per tree: its fork parent's wall and its item count, on a 2-core machine;
``nova-chaos costs REPORT...`` writes it) or, with ``--durations``, a
previous report's. A tree without a measured cost weighs its item count
times the mean measured item. Nothing depends on the machine: the same plan
and cost file give every shard the same items anywhere. ``nova-chaos
merge`` joins the shards' reports and refuses a missing or duplicated item.
"""
from __future__ import annotations

import hashlib
import json
import math
import os

from harness.errors import UsageError

#: measured seconds per fork tree (``nova-chaos costs``), read when no weights are given
COSTS_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "scenarios", "tree-costs.json")


def parse(text: str) -> tuple:
    """``"K/N"`` -> (K, N), 1 <= K <= N."""
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise UsageError(f"--shard {text!r}: expected K/N with 1 <= K <= N, e.g. 2/4")
    return int(k), int(n)


def tree_key(item) -> str:
    """The fork tree ``item`` belongs to, as text (a cost file's key)."""
    return "|".join((item.scenario, item.window, item.fault, item.mutation or "-"))


def _report(path: str) -> dict:
    """A JSON report (gzipped if its name ends in .gz, as docs/campaigns keeps them)."""
    import gzip
    try:
        with (gzip.open if path.endswith(".gz") else open)(path, "rt") as fh:
            data = json.load(fh)
        data["items"], data["meta"]
        return data
    except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
        raise UsageError(f"{path}: not a nova-chaos JSON report "
                         f"({type(exc).__name__}: {str(exc)[:120]})") from None


def tree_costs(report: dict) -> dict:
    """tree key -> {"seconds", "items"} measured by one run's report.

    A tree's seconds are its fork parents' wall (``fork_parents[].seconds``,
    summed over the shards that held a part of it); a report without them
    (fresh mode, or made before they were recorded) has its run's wall
    shared out by each tree's summed item seconds.
    """
    from harness.execute.item import Item
    items: dict = {}
    for r in report["items"]:
        item = Item.parse(r["id"])
        if item.is_uninjected:
            continue
        one = items.setdefault(tree_key(item), {"seconds": 0.0, "items": 0})
        one["items"] += 1
        one["seconds"] += float(r.get("seconds") or 0)
    parents = [p for p in report["meta"].get("fork_parents") or [] if "seconds" in p]
    if parents:
        walls: dict = {}
        for p in parents:
            key = "|".join((p["scenario"], p["window"], p["fault"], p["mutation"] or "-"))
            walls[key] = walls.get(key, 0.0) + p["seconds"]
        for key, one in items.items():
            one["seconds"] = walls.get(key, one["seconds"])
    else:
        summed = sum(one["seconds"] for one in items.values()) or 1.0
        wall = float(report["meta"].get("seconds") or summed)
        for one in items.values():
            one["seconds"] = one["seconds"] * wall / summed
    return {k: {"seconds": round(v["seconds"], 1), "items": v["items"]}
            for k, v in sorted(items.items())}


def durations(path: str) -> dict:
    """item id -> seconds, from a previous JSON report (``--durations FILE``): each tree's
    measured wall (:func:`tree_costs`) shared among its items by their own seconds."""
    report = _report(path)
    trees = tree_costs(report)
    from harness.execute.item import Item
    by_tree: dict = {}
    for r in report["items"]:
        item = Item.parse(r["id"])
        if not item.is_uninjected:
            by_tree.setdefault(tree_key(item), []).append((r["id"], float(r.get("seconds") or 0)))
    out = {}
    for key, rows in by_tree.items():
        summed = sum(s for _, s in rows)
        for item_id, s in rows:
            share = s / summed if summed > 0 else 1 / len(rows)
            out[item_id] = trees[key]["seconds"] * share
    return out


def load_costs(path: str | None = None) -> dict:
    """The cost file's trees (tree key -> {"seconds", "items"}); none if there is no file."""
    path = path or COSTS_FILE
    if not os.path.exists(path):
        return {}
    try:
        with open(path) as fh:
            trees = json.load(fh)["trees"]
        return {k: {"seconds": float(v["seconds"]), "items": int(v["items"])}
                for k, v in trees.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{path}: not a cost file of 'nova-chaos costs' ({exc!r})") from None


def write_costs(reports: list, path: str = COSTS_FILE) -> dict:
    """Measure each tree from ``reports`` (later ones win) into the cost file at ``path``."""
    trees: dict = {}
    sources = []
    for one in reports:
        measured = tree_costs(_report(one))
        trees.update(measured)
        sources.append(f"{os.path.basename(one)} ({len(measured)} trees)")
    data = {"about": "measured seconds per fork tree (scenario|window|fault|mutation): its "
                     "fork parent's wall, --jobs 2 on 2 cores, and its item count; read by "
                     "--shard K/N (harness/execute/shards.py). Regenerate: nova-chaos costs "
                     "REPORT.json... (e.g. reports/full.json of tox -e full)",
            "from": sources, "trees": dict(sorted(trees.items()))}
    from harness.front.report import atomic_write
    atomic_write(path, json.dumps(data, indent=1, sort_keys=False) + "\n")
    return trees


def item_weights(items: list, weights: dict | None) -> dict:
    """item id -> seconds for every item: ``weights`` (item ids), else the cost file's
    tree seconds shared evenly among its items, else the mean measured item."""
    if weights is None:
        trees = load_costs()
        weights = {}
        for item in items:
            tree = trees.get(tree_key(item))
            if tree and tree["items"]:
                weights[item.id] = tree["seconds"] / tree["items"]
    known = [w for w in weights.values() if w > 0]
    default = sum(known) / len(known) if known else 1.0
    return {i.id: (weights.get(i.id) or default) for i in items}


def _runs(points: list, cost: dict, pieces: int) -> list:
    """Cut ``points`` (in trace order) into ``pieces`` runs of consecutive points of
    near-equal weight: the run a point falls in is by the weight before its middle."""
    total = sum(cost[p] for p in points) or 1.0
    runs: list = [[] for _ in range(pieces)]
    done = 0.0
    for p in points:
        runs[min(pieces - 1, int((done + cost[p] / 2) * pieces / total))].append(p)
        done += cost[p]
    return [r for r in runs if r]


def assign(items: list, n: int, weights: dict | None = None) -> dict:
    """item id -> shard number (1..n): whole trees by LPT, split only where needed."""
    w = item_weights(items, weights)
    trees: dict = {}  # key -> {point: [items]}, points in plan (trace) order
    for item in items:
        trees.setdefault(tree_key(item), {}).setdefault(item.point, []).append(item)
    point_cost = {(k, p): sum(w[i.id] for i in its)
                  for k, points in trees.items() for p, its in points.items()}
    tree_cost = {k: sum(point_cost[k, p] for p in points) for k, points in trees.items()}
    ideal = sum(tree_cost.values()) / n
    # pieces per tree: one, or as many ideal shares as it weighs (at most its points)
    pieces = {k: max(1, min(len(trees[k]), math.ceil(tree_cost[k] / ideal - 1e-9)))
              if ideal > 0 else 1 for k in trees}
    while sum(pieces.values()) < n:  # fewer pieces than shards: cut the heaviest piece again
        can = [k for k in trees if pieces[k] < len(trees[k])]
        if not can:
            break
        heaviest = min(can, key=lambda k: (-tree_cost[k] / pieces[k], k))
        pieces[heaviest] += 1
    deal = []  # (cost, tree key, run index, points)
    for k, points in trees.items():
        cost = {p: point_cost[k, p] for p in points}
        for index, run in enumerate(_runs(list(points), cost, pieces[k])):
            deal.append((sum(cost[p] for p in run), k, index, run))
    load = [0.0] * n
    out = {}
    for cost, k, _, run in sorted(deal, key=lambda d: (-d[0], d[1], d[2])):
        shard = min(range(n), key=lambda s: (load[s], s))
        load[shard] += cost
        for p in run:
            out.update((i.id, shard + 1) for i in trees[k][p])
    return out


def select(items: list, k: int, n: int, weights: dict | None = None) -> list:
    """The items of shard ``k`` of ``n``, in plan order. ``weights``: item id -> seconds
    (:func:`durations`); by default the repository's cost file (:data:`COSTS_FILE`)."""
    mine = assign(items, n, weights)
    return [i for i in items if mine[i.id] == k]


def partition_digest(cut: dict) -> str:
    """Names how the plan was cut (:func:`assign`): shards cut otherwise do not merge."""
    text = "\n".join(f"{i} {s}" for i, s in sorted(cut.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def digest(items: list) -> str:
    """Names the whole plan, so that merge can tell shards of one run from others."""
    return hashlib.sha256("\n".join(i.id for i in items).encode()).hexdigest()[:16]
