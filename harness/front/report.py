"""Reporting: progress, the points x targets x endings table, JSON, JUnit, reproducers.

Files are written atomically (temp file + rename), so an interrupted run
never leaves a half-written report behind.
"""
from __future__ import annotations

import collections
import json
import os
import sys
import time
import xml.etree.ElementTree as ET

from harness.execute.item import UNINJECTED
from harness import faults
from harness.files import UMASK, atomic_write  # noqa: F401 - the reports' writer

MARK = {"pass": ".", "known": "k", "fail": "F", "error": "E"}


class Progress:
    """A one-line progress bar on a terminal, periodic lines otherwise."""

    def __init__(self, total: int, stream=sys.stderr, clock=time.monotonic):
        self.total, self.done, self.stream, self.clock = total, 0, stream, clock
        self.counts = collections.Counter()
        self.tty = stream.isatty()
        self.started = clock()

    def pace(self) -> str:
        """Items per second so far and the time the rest would take at that rate."""
        elapsed = self.clock() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if not rate:
            return ""
        left = int((self.total - self.done) / rate)
        return f" {rate:.2f}/s, {left // 3600}:{left // 60 % 60:02d}:{left % 60:02d} left"

    def update(self, result) -> None:
        self.done += 1
        self.counts[result.verdict] += 1
        width = 30
        filled = width * self.done // max(self.total, 1)
        summary = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {summary}"
                f"{self.pace()}")
        if self.tty:
            self.stream.write("\r" + line)
            if self.done == self.total:
                self.stream.write("\n")
        elif self.done == self.total or self.done % 10 == 0:
            self.stream.write(line + "\n")
        self.stream.flush()


class PartialReport:
    """The JSON report, rewritten as results arrive (at most every ``every`` s), atomically.

    A full campaign runs for hours; one stopped near the end (a CI limit, a
    kill, Ctrl-C) keeps what it measured. Its meta says it is partial and how
    far it got; ``rejudge`` reads it like any report.
    """

    def __init__(self, path: str, meta: dict, planned: int, every: float = 30.0):
        # absolute: a fork parent works in its own directory while the run is on
        self.path, self.meta, self.planned, self.every = os.path.abspath(path), meta, planned, every
        self.results: dict = {}
        self.last = time.monotonic()
        self.pid = os.getpid()  # forked children inherit this object: only the owner writes

    def add(self, result) -> None:
        self.results[result.item.id] = result
        if time.monotonic() - self.last >= self.every:
            self.write()

    def write(self) -> None:
        if os.getpid() != self.pid or not self.results:
            return
        meta = dict(self.meta, partial=True, items_done=len(self.results),
                    items_planned=self.planned)
        atomic_write(self.path, to_json(list(self.results.values()), meta))
        self.last = time.monotonic()


#: the terminal table fits this many columns
TABLE_COLUMNS = 100
_SHORT = {"source": "src", "dest": "dst"}


def table(results, points, targets, endings, columns: int = TABLE_COLUMNS) -> str:
    """One row per point, a group of marks per target (one mark per ending).

    Fits ``columns``: a point id too long for its column keeps its head and
    tail around an ellipsis (the full ids are in the JSON report and in
    ``nova-chaos points``, numbered as here).
    """
    by = {(r.item.point, r.item.target, r.item.ending): r for r in results}
    group = max(len(endings), 4)
    marks = " ".join(f"{_SHORT.get(t, t)[:group]:<{group}}" for t in targets)
    width = max(10, min(max([len(p) for p in points] + [10]), columns - 6 - len(marks)))
    lines = [" " * (width + 6) + marks,
             " " * (width + 6) + " ".join(f"{''.join(e[0] for e in endings):<{group}}"
                                          for _ in targets)]
    for i, p in enumerate(points, 1):
        cells = " ".join(
            f"{''.join(MARK[by[(p, t, e)].verdict] if (p, t, e) in by else ' ' for e in endings):<{group}}"
            for t in targets)
        lines.append(f"{i:>3}. {_fit(p, width):<{width}} {cells}".rstrip())
    counts = collections.Counter(r.verdict for r in results)
    lines.append("legend: " + ", ".join(f"{e[0]} {e}" for e in endings)
                 + ";  . pass  k known finding  F fail  E error")
    lines.append("totals: " + ", ".join(f"{k} {counts[k]}" for k in ("pass", "known", "fail", "error")))
    return "\n".join(lines)


def _fit(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "\u2026" + text[len(text) - (width - 1 - head):]


def failure_text(result) -> str:
    lines = [f"FAILED {result.item.id}" + (" (no fault injected: the run every item of this "
                                           "ending starts from)" if result.item.is_uninjected
                                           else "")]
    lines += [f"  {p}" for p in result.problems]
    if result.memo:  # replay runs it in full: the same verdict is the memo's soundness
        lines.append(f"  continuation inherited: {result.memo}")
    lines.append(f"  reproduce: {result.item.replay_command()}")
    return "\n".join(lines)


def _id_parts(item_id: str) -> tuple:
    """(scenario, window, point, target, ending) of a stored item id."""
    from harness.execute.item import Item
    item = Item.parse(item_id)
    return item.scenario, item.window, item.point, item.target, item.ending


def _fault_of(item_id: str) -> str:
    from harness.execute.item import Item
    return Item.parse(item_id).fault


def failure_groups(records: list, campaigns: list) -> str:
    """Failing items of a JSON report, grouped by what they found.

    A long campaign fails hundreds of items for one cause at consecutive
    points; a reviewer wants the cause once, with the point range, the
    targets and endings it spans, and one replay command.
    """
    order = {(c["scenario"], c["window"], p): i
             for c in campaigns for i, p in enumerate(c["points"], 1)}
    groups: dict = {}
    for r in records:
        if r["verdict"] not in ("fail", "error"):
            continue
        scen, window, point, target, ending = _id_parts(r["id"])
        found = tuple(sorted({(f["class"], f["checkpoint"].split("@")[0], f["check"], f["where"])
                              for f in r.get("findings", [])}))
        # a stale known entry is named whole; other problems (errors, traces) by their kind
        other = tuple(sorted({p["text"] if p["kind"] == "stale-known" else p["kind"]
                              for p in r["problems"] if p["kind"] != "finding"}))
        groups.setdefault((scen, window, found, other), []).append(
            (order.get((scen, window, point), 0), target, ending, r["id"]))
    lines = []
    for (scen, window, found, other), members in sorted(groups.items(),
                                                         key=lambda kv: (kv[0][:2], kv[1][0])):
        at = sorted({m[0] for m in members})
        lines.append(f"{len(members)} items of {scen}, window {window}: points {at[0]}..{at[-1]} "
                     f"({len(at)} points); targets {', '.join(sorted({m[1] for m in members}))}; "
                     f"endings {', '.join(sorted({m[2] for m in members}))}")
        lines += [f"    {klass:9} at {cp}: [{check}] {where}" for klass, cp, check, where in found]
        lines += [f"    {problem}" for problem in other]
        lines.append(f"    e.g. nova-chaos replay '{members[0][3]}'")
    return "\n".join(lines)


def _named(points: tuple, sets: dict) -> list:
    """``points`` with every named set it holds whole written as ``@name``."""
    out = list(points)
    for name, members in sets.items():
        if members and set(members) <= set(out):
            at = min(out.index(m) for m in members)
            out = [p for p in out if p not in members]
            out.insert(min(at, len(out)), f"@{name}")
    return out


def proposed_entries(records: list, sets: dict | None = None) -> str:
    """Known-findings entries (TOML) that would cover exactly the failing items, for review.

    Items whose findings are the same are one group; a group becomes one
    entry per set of points shared by the same targets and endings, so no
    entry applies to an item outside its group. ``reason`` is left for the
    reviewer: a proposal is not a review.
    """
    from harness.oracles import known
    groups: dict = {}
    values: dict = {}  # (group, place) -> every value its items showed there
    for r in records:
        if r["verdict"] != "fail" or not r.get("findings"):
            continue
        if any(p["kind"] != "finding" for p in r["problems"]):
            continue  # errors, stale entries, diverged traces: not a finding to accept
        if _id_parts(r["id"])[2] == UNINJECTED:
            continue  # a Nova that fails with no fault injected is broken, not explained
        scen, window, point, target, ending = _id_parts(r["id"])
        window = (window, _fault_of(r["id"]))
        places = {}
        for f in r["findings"]:
            place = (f["checkpoint"].split("@")[0] + ("@*" if "@" in f["checkpoint"] else ""),
                     f["check"], f["where"], f["class"])
            places.setdefault(place, set()).add(known.value_of(known.stored_finding(f)))
        expect = tuple(sorted(places))
        per_pair = groups.setdefault((scen, window, expect), {})
        per_pair.setdefault((target, ending), []).append(point)
        for place, seen in places.items():
            values.setdefault((scen, window, expect, place), set()).update(seen)
    out = []
    for (scen, window, expect), per_pair in groups.items():
        blocks: dict = {}  # (points, ending) -> targets; then (points, targets) -> endings
        for (target, ending), points in per_pair.items():
            blocks.setdefault((tuple(points), ending), []).append(target)
        merged: dict = {}
        for (points, ending), targets in blocks.items():
            merged.setdefault((points, tuple(sorted(targets))), []).append(ending)
        for (points, targets), endings in merged.items():
            for klass in ("hard", "transient"):  # an entry covers findings of its class only
                mine = [e for e in expect if e[3] == klass]
                if not mine:
                    continue
                out += ["[[finding]]", f'scenario = "{scen}"', f'window = "{window[0]}"']
                if not faults.parse(window[1]).implicit:
                    out.append(f'fault = "{window[1]}"')
                out.append("points = [")
                out += [f'    "{p}",' for p in _named(points, sets or {})]
                out += ["]", f"targets = {list(targets)!r}".replace("'", '"'),
                        f"endings = {sorted(endings)!r}".replace("'", '"'), "expect = ["]
                for place in mine:
                    cp, check, where, _ = place
                    seen = _toml_strings(values[(scen, window, expect, place)])
                    out.append(f'    {{ checkpoint = "{cp}", check = "{check}", '
                               f'where = "{where}", seen = {seen} }},')
                out += ["]", f'class = "{klass}"', 'reason = "TODO: why clean Nova does this"', ""]
    return "\n".join(out)


def _toml_strings(values) -> str:
    return "[" + ", ".join(json.dumps(v) for v in sorted(values)) + "]"


def uninjected_lines(records) -> list:
    """The uninjected runs' verdicts, one line per scenario: what every item started from."""
    by = {}
    for r in records:
        by.setdefault(r.item.scenario + (f" (mutation {r.item.mutation})" if r.item.mutation
                                         else ""), []).append(f"{r.item.ending} {r.verdict}")
    return [f"uninjected run of {name}: {', '.join(parts)}" for name, parts in by.items()]


def to_json(results, meta: dict) -> str:
    return json.dumps({"meta": meta, "items": [r.to_json() for r in results]}, indent=2)


def to_junit(results, suite: str, html: str | None = None, causes: dict | None = None,
             fixed: tuple = ()) -> str:
    """JUnit XML; with ``html`` (the HTML report's path), each failing or known
    case says where its timeline is (``PATH#item-...``). ``causes`` (the run's
    summary by root cause): the suite's properties count each cause's items, a
    known case names its causes, and a cause that no longer reproduces (or one
    said fixed that still bites) is a failing case of its own, ``root-cause/NAME``."""
    from harness.front import by_cause
    from harness.front.html import anchor
    causes = causes or {}
    broken = by_cause.verdict_problems(causes, fixed)
    root = ET.Element("testsuite", name=suite, tests=str(len(results) + len(broken)),
                      failures=str(sum(r.verdict == "fail" for r in results) + len(broken)),
                      errors=str(sum(r.verdict == "error" for r in results)))
    if causes:
        props = ET.SubElement(root, "properties")
        for name, e in causes.items():
            ET.SubElement(props, "property", name=f"root-cause:{name}",
                          value=f"{e['class']}; bit in {len(e['bit'])} items, held in {e['held']}")
    for name in broken:
        case = ET.SubElement(root, "testcase", classname=suite, name=f"root-cause/{name}")
        text = by_cause.said(name, causes, fixed)
        ET.SubElement(case, "failure", message=text[:200]).text = text
    for r in results:
        case = ET.SubElement(root, "testcase", classname=suite, name=r.item.id,
                             time=f"{r.seconds:.3f}")
        bit = r.causes.get("bit", [])
        if bit:
            props = ET.SubElement(case, "properties")
            for name in bit:
                ET.SubElement(props, "property", name="root-cause", value=name)
        link = f"\ndetails: {os.path.basename(html)}#{anchor(r.item.id)}" if html else ""
        if r.verdict in ("fail", "error"):
            tag = "failure" if r.verdict == "fail" else "error"
            el = ET.SubElement(case, tag, message=str((r.problems or ["?"])[0])[:200])
            el.text = failure_text(r) + link
        elif r.known:
            ET.SubElement(case, "system-out").text = "\n".join(r.known) + link
    return ET.tostring(root, encoding="unicode")
