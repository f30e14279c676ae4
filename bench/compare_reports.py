"""Compare two JSON reports of the same items: verdicts, problems and findings must agree.

The soundness check of memoized continuations (issue 17): a run with the
memo and one with ``--no-memo`` must judge every item alike::

    nova-chaos run S --window resize --window lifecycle --json memo.json
    nova-chaos run S --window resize --window lifecycle --no-memo --json full.json
    python bench/compare_reports.py memo.json full.json

A finding is compared by checkpoint, check, where and value (a log line's
text carries its own time and request id: its value is the exception it
names). Prints the memo hit rate of the first report; exits 1 on any difference.
"""
from __future__ import annotations

import collections
import gzip
import json
import sys


def load(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return {item["id"]: item for item in json.load(fh)["items"]}


def judged(item: dict) -> tuple:
    """What an item's judgement consists of, as comparable data."""
    findings = sorted((f["checkpoint"], f["check"], f["where"], f["value"])
                      for f in item.get("findings", []))
    problems = sorted(p["kind"] for p in item["problems"])
    return item["verdict"], problems, findings


def compare(a: dict, b: dict) -> list:
    """Lines naming every difference between reports ``a`` and ``b``."""
    out = [f"only in the first: {i}" for i in sorted(set(a) - set(b))]
    out += [f"only in the second: {i}" for i in sorted(set(b) - set(a))]
    for item_id in sorted(set(a) & set(b)):
        x, y = judged(a[item_id]), judged(b[item_id])
        if x != y:
            out.append(f"{item_id}: {x[0]} {x[1]} vs {y[0]} {y[1]}; findings only in the first "
                       f"{sorted(set(x[2]) - set(y[2]))[:3]}, only in the second "
                       f"{sorted(set(y[2]) - set(x[2]))[:3]}")
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: compare_reports.py FIRST.json SECOND.json", file=sys.stderr)
        return 2
    a, b = load(argv[0]), load(argv[1])
    verdicts = collections.Counter(i["verdict"] for i in a.values())
    inherited = sum(1 for i in a.values() if i.get("memo"))
    print(f"{len(a)} items ({dict(sorted(verdicts.items()))}); continuations inherited in the "
          f"first: {inherited} ({100 * inherited / max(1, len(a)):.0f} %)")
    differences = compare(a, b)
    for line in differences:
        print(line)
    print(f"{len(differences)} difference(s)")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
