"""Known findings: reviewed, classified, strict.

``scenarios/known-findings.toml`` lists findings that clean Nova really
produces under some injections, each with its class, reason and bug link.
An item whose findings are all covered by entries that apply to it passes
as *known*; a finding no entry covers fails it (new finding); an entry that
applies to the item but matches none of its findings fails it too (the
finding no longer reproduces: the file must be updated).
"""
from __future__ import annotations

import dataclasses
import fnmatch
import os
import re

from harness import files
from harness.errors import InvalidScenario
from harness.oracles.checks import value_of  # noqa: F401  (reports name values through here)
from harness import faults
from harness.scenario import SCENARIO_DIR
from harness.explore.tracer import DEFAULT_WINDOW

KNOWN_FILE = os.path.join(SCENARIO_DIR, "known-findings.toml")
#: another known-findings file for this process and every process it starts
#: (``nova-chaos known --known FILE``: forked children and workers judge by it)
KNOWN_ENV = "NOVA_CHAOS_KNOWN"
CLASSES = ("hard", "transient")
_KEYS = {"scenario", "points", "targets", "endings", "mutation", "expect", "class", "reason",
         "bug", "window", "fault"}
_EXPECT_KEYS = {"checkpoint", "check", "where", "seen"}

#: legacy counters that every periodic rebuilds from scratch
_LEGACY = ("vcpus_used", "memory_mb_used")
_NEAREST = re.compile(r" \(nearest: [^)]*\)$")


def classify(finding) -> str:
    """*transient* if the next periodic necessarily rebuilds it, else *hard*.

    Legacy counters are recomputed from scratch by every periodic, so a wrong
    one (and the convergence periodic's repair of it) heals by itself; wrong
    pinning, hugepages, placement, ground truth, errors or ERROR state do not.
    """
    where = _NEAREST.sub("", finding.where)  # inside a step: "... (nearest: verify-resize)"
    if finding.check in ("rt", "convergence") and where.endswith(_LEGACY):
        return "transient"
    return "hard"


@dataclasses.dataclass(frozen=True)
class Entry:
    scenarios: tuple  # globs
    points: tuple
    targets: tuple
    endings: tuple
    mutation: str
    window: str
    expect: tuple  # ((checkpoint glob, check, where glob, values), ...), each must be seen
    klass: str
    reason: str
    bug: str
    # which faults' items it covers (a glob; the default "*": every fault that injects the
    # periodic -- a restart item runs another script, so only an entry naming it covers it)
    fault: str = "*"

    def covers_scenario(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, s) for s in self.scenarios)

    def applies(self, item) -> bool:
        return (self.covers_scenario(item.scenario)
                and any(fnmatch.fnmatchcase(item.point, p) for p in self.points)
                and item.target in self.targets and item.ending in self.endings
                and fnmatch.fnmatchcase(item.mutation or "none", self.mutation)
                and fnmatch.fnmatchcase(item.window, self.window)
                and fnmatch.fnmatchcase(item.fault, self.fault)
                and (self.fault != "*" or faults.parse(item.fault).periodic))

    def covering(self, checkpoint: str, finding):
        """Index of the expectation that covers this finding, or None.

        Value-exact: the place (checkpoint, check, where) must match *and*
        the finding's value must be one the entry names; the same place with
        another value is a new finding. ``after-delete`` is matched only by
        an expectation that names it: "everything back to zero" is not
        absorbed by a ``*``.
        """
        for i, (cp, check, where, values) in enumerate(self.expect):
            if (fnmatch.fnmatchcase(checkpoint, cp) and finding.check == check
                    and (checkpoint != "after-delete" or cp == "after-delete")
                    and fnmatch.fnmatchcase(finding.where, where)
                    and value_of(finding) in values):
                return i
        return None

    def describe(self, index: int) -> str:
        cp, check, where, values = self.expect[index]
        return f"{self.klass} [{check}] {where} = {' or '.join(values)} at {cp}: {self.reason}"


class _Shown(str):
    """A value as a report printed it (its repr), standing in for the value."""

    def __repr__(self):
        return str(self)


def stored_finding(record: dict):
    """A finding of a stored report (JSON), its values as the report printed them."""
    from harness.oracles.checks import Finding
    return Finding(record["check"], record["where"], _Shown(record["expected"]),
                   _Shown(record["seen"]))


def load(path: str | None = None) -> list:
    path = path or os.environ.get(KNOWN_ENV) or KNOWN_FILE
    if not os.path.exists(path):
        return []
    raw = files.read_toml(path)
    sets = _sets(raw, path)
    entries = []
    for i, e in enumerate(raw.get("finding", [])):
        where = f"{os.path.basename(path)}: finding[{i}]"
        unknown = set(e) - _KEYS
        missing = _KEYS - {"mutation", "bug", "window", "fault"} - set(e)
        if unknown or missing:
            raise InvalidScenario(f"{where}: unknown keys {sorted(unknown)}, missing {sorted(missing)}")
        if e["class"] not in CLASSES:
            raise InvalidScenario(f"{where}: class must be one of {CLASSES}")
        expect = []
        for x in e["expect"]:
            if set(x) != _EXPECT_KEYS:
                raise InvalidScenario(f"{where}: each expect needs exactly {sorted(_EXPECT_KEYS)} "
                                      "(seen: the value, or values, the finding showed)")
            seen = x["seen"] if isinstance(x["seen"], list) else [x["seen"]]
            if not seen or not all(isinstance(v, str) for v in seen):
                raise InvalidScenario(f"{where}: seen must be a value as reports print it, "
                                      "or a list of them")
            expect.append((x["checkpoint"], x["check"], x["where"], tuple(seen)))
        scenarios = e["scenario"] if isinstance(e["scenario"], list) else [e["scenario"]]
        entries.append(Entry(tuple(scenarios), _points(e["points"], sets, where), tuple(e["targets"]),
                             tuple(e["endings"]), e.get("mutation", "*"),
                             e.get("window", DEFAULT_WINDOW), tuple(expect),
                             e["class"], e["reason"], e.get("bug", ""),
                             e.get("fault", "*")))
    return entries


def point_sets(path: str = KNOWN_FILE) -> dict:
    """The file's ``[point_sets]``: name -> point ids (for proposals to name them)."""
    if not os.path.exists(path):
        return {}
    return _sets(files.read_toml(path), path)


def _sets(raw: dict, path: str) -> dict:
    sets = raw.get("point_sets", {})
    if not isinstance(sets, dict) or not all(isinstance(v, list) for v in sets.values()):
        raise InvalidScenario(f"{path}: [point_sets] maps names to lists of point ids")
    return sets


def _points(points: list, sets: dict, where: str) -> tuple:
    """An entry's points, each ``@name`` replaced by the ``[point_sets]`` list of that name.

    One Nova window (the revert gap, say) shows in many scenarios at the same
    calls: it is written once and named, so a correction lands everywhere.
    """
    out = []
    for p in points:
        if p.startswith("@"):
            if p[1:] not in sets:
                raise InvalidScenario(f"{where}: unknown point set {p!r}; defined: "
                                      f"{', '.join('@' + n for n in sets) or 'none'}")
            out += sets[p[1:]]
        else:
            out.append(p)
    return tuple(out)


def judge(item, checkpoints, entries) -> tuple:
    """Return ``(unknown findings, stale entries, known (entry, finding) pairs)``."""
    applicable = [e for e in entries if e.applies(item)]
    unknown, used, known = [], set(), []
    for cp in checkpoints:
        for finding in cp.findings:
            match = next(((e, i) for e in applicable
                          for i in [e.covering(cp.name, finding)]
                          if i is not None and e.klass == classify(finding)), None)
            if match is None:
                unknown.append((cp.name, finding))
            else:
                used.add(match)
                known.append((match[0], finding))
    stale = [(e, i) for e in applicable for i in range(len(e.expect)) if (e, i) not in used]
    return unknown, stale, known
