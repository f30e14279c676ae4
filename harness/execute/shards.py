"""Split a campaign over machines: ``--shard K/N`` picks the K-th of N slices, deterministically.

Items that share a fork prefix (one scenario, window, fault and mutation:
one uninjected parent) are a *group*; each group's points, in trace
order, are cut into N runs of consecutive points of near-equal weight, and
shard K takes run K of every group. Consecutive points share the longest
prefix, every shard gets a slice of every group (so the slowest group
cannot leave the other shards idle), and nothing depends on the machine:
the same plan gives every shard the same slices on any machine. Weights
are the seconds a previous report recorded per item (``--durations``), or
one per item. ``nova-chaos merge`` joins the shards' reports and refuses a
missing or duplicated item.
"""
from __future__ import annotations

import hashlib
import json

from harness.errors import UsageError


def parse(text: str) -> tuple:
    """``"K/N"`` -> (K, N), 1 <= K <= N."""
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise UsageError(f"--shard {text!r}: expected K/N with 1 <= K <= N, e.g. 2/4")
    return int(k), int(n)


def durations(path: str) -> dict:
    """item id -> seconds, from a previous JSON report (``--durations FILE``)."""
    try:
        with open(path) as fh:
            return {r["id"]: float(r.get("seconds") or 0) for r in json.load(fh)["items"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--durations {path}: not a nova-chaos JSON report ({exc!r})") from None


def group_key(item) -> tuple:
    return (item.scenario, item.window, item.fault, item.mutation or "")


def select(items: list, k: int, n: int, weights: dict | None = None) -> list:
    """The items of shard ``k`` of ``n``, in plan order."""
    weights = weights or {}
    # an item without a recorded duration weighs what the recorded ones do on average
    known = [w for w in weights.values() if w > 0]
    default = sum(known) / len(known) if known else 1.0
    groups: dict = {}
    for item in items:
        groups.setdefault(group_key(item), {}).setdefault(item.point, []).append(item)
    mine = set()
    for points in groups.values():
        cost = [(p, sum(weights.get(i.id, default) for i in its)) for p, its in points.items()]
        total = sum(c for _, c in cost) or 1.0
        done = 0.0
        for point, c in cost:
            # the run a point falls in: by the weight before its middle
            index = min(n - 1, int((done + c / 2) * n / total))
            done += c
            if index == k - 1:
                mine.update(i.id for i in points[point])
    return [i for i in items if i.id in mine]


def digest(items: list) -> str:
    """Names the whole plan, so that merge can tell shards of one run from others."""
    return hashlib.sha256("\n".join(i.id for i in items).encode()).hexdigest()[:16]
