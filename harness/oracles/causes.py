"""Root causes: a known finding is a mechanism in Nova, not a list of points.

``scenarios/root-causes.toml`` names each mechanism once, for every
scenario and point where it bites:

* its **condition**, over the state the injected periodic met
  (:mod:`harness.oracles.state`: which host of a server's move runs it, the
  instance's host and task state, the migration's type and status, which
  trackers track what) -- never over the name of a call, so a harmless
  extra call inside the window is the same cause;
* its **effect** on the trackers, stated against the ledger: "the
  source's tracker lacks the guest it holds", "the destination counts the
  old flavor in its counters instead of the new one". The harness undoes
  the effect on the views the checkpoint read and runs the ledger checks
  again (and the convergence periodic's comparison): if nothing is left,
  the cause explains every one of those findings, with the exact values
  Nova's choices give in that scenario. What no tracker holds (a server in
  ERROR, a logged exception) is named as it shows.

Value-exact: an effect that does not account for a finding exactly leaves
it, and the item fails as a new finding; the same condition with another
effect is a new finding. A cause whose condition held where it did not
bite is counted, not failed: a run says once when a cause bit nowhere.
"""
from __future__ import annotations

import collections
import copy
import dataclasses
import fnmatch
import itertools
import os

from harness import faults, files
from harness.errors import InvalidScenario
from harness.oracles import checks, pci_undo
from harness.oracles.ledger import placement_resources
from harness.scenario import SCENARIO_DIR

CAUSES_FILE = os.path.join(SCENARIO_DIR, "root-causes.toml")
#: another causes file for this process and every process it starts
CAUSES_ENV = "NOVA_CHAOS_CAUSES"
CLASSES = ("hard", "transient")
#: the fault a cause names to explain an uninjected run: a defect of Nova's own path
UNINJECTED = "none"
_KEYS = {"name", "class", "title", "bug", "nova", "fault", "scenario", "when", "effect",
         "expect", "why"}
_EFFECT_KEYS = {"at", "host", "lacks", "counts", "cells", "counters", "consumer", "persists",
                "domain", "parts", "scenario"}
#: what of a guest's NUMA cells an effect may name (``parts``; default all of them)
PARTS = ("cpus", "pages", "small_pages", "memory_mb", "shared")
_DOMAINS = ("defined", "running")
_CONSUMERS = ("instance", "migration")
_EXPECT_KEYS = {"at", "check", "where", "seen"}
_TOPOLOGIES = ("current", "old", "new")
_FLAVORS = ("old", "new")


@dataclasses.dataclass(frozen=True)
class Effect:
    """``host`` lacks (``sign`` -1) or holds extra (+1) one holding of the server: in its
    tracker, or with ``consumer`` in placement (that consumer's allocation there)."""

    at: tuple          # checkpoint globs
    host: str          # the server's move role: source, dest
    sign: int
    flavor: str        # old | new: whose vCPUs and memory (placement: resources)
    cells: str | None  # current | old | new: whose NUMA cells (None: counters only)
    counters: bool = True  # False: the cells only (the legacy counters are right)
    consumer: str | None = None  # instance | migration: a placement allocation
    persists: bool = False  # the convergence periodic leaves it (placement's always do)
    domain: str | None = None  # defined | running: a domain of the server on the host
    parts: tuple = PARTS  # which of the cells' holdings (pinned cpus, pages, memory...)
    scenarios: tuple = ("*",)  # where it shows: a layout decides some effects' extent

    def shows_in(self, scenario: str) -> bool:
        return _scenario_in(scenario, self.scenarios)

    def describe(self) -> str:
        verb = "lacks" if self.sign < 0 else "counts"
        if self.consumer:
            return (f"placement {verb} the {self.consumer}'s allocation of the {self.flavor} "
                    f"flavor on {self.host}")
        if self.domain:
            return (f"{self.host}'s libvirt {verb} a {self.domain} domain of the server with "
                    f"the {self.cells} cells")
        cells = "cells" if self.parts == PARTS else "cells' " + "/".join(self.parts)
        what = (f"{verb} the {self.flavor} flavor" + ("" if self.counters else f"'s {cells} only")
                + (f" with the {self.cells} cells" if self.cells and self.counters
                   else f" ({self.cells})" if self.cells else ""))
        return (f"{self.host}'s tracker {what}"
                + (" (the periodic keeps it)" if self.persists else "")
                + ("" if self.scenarios == ("*",) else f" on {', '.join(self.scenarios)}"))


@dataclasses.dataclass(frozen=True)
class Expect:
    """A finding no view holds, as it shows: ``where`` names hosts ``{source}``,
    ``{dest}`` and the server ``{server}``; ``seen`` globs over its value."""

    at: tuple
    check: str
    where: str
    seen: tuple


@dataclasses.dataclass(frozen=True)
class Cause:
    name: str
    klass: str
    title: str
    bug: str
    nova: str
    faults: tuple      # globs over the item's fault
    scenarios: tuple   # globs
    when: dict         # dotted key of a server's facts -> allowed values
    effects: tuple     # Effect
    expects: tuple     # Expect
    why: str = ""

    @property
    def reason(self) -> str:
        """One line naming the mechanism (what reports and exports print)."""
        return f"{self.name}: {self.title}"

    def holds(self, facts: dict) -> bool:
        return all(_plain(_get(facts, key)) in allowed for key, allowed in self.when.items())

    def covers(self, item) -> bool:
        """Whether the item's fault and scenario are the cause's (a ``!glob`` excludes);
        an uninjected run's fault is ``none``."""
        fault = UNINJECTED if item.is_uninjected else item.fault
        return (any(fnmatch.fnmatchcase(fault, f) for f in self.faults)
                and _scenario_in(item.scenario, self.scenarios))

    def acts_at(self, checkpoint: str) -> bool:
        return any(_at(checkpoint, c.at) for c in (*self.effects, *self.expects))


_MISSING = object()


def _scenario_in(name: str, globs: tuple) -> bool:
    """Whether globs (``!glob`` excludes; only exclusions: every other one) name a scenario."""
    wanted = [s for s in globs if not s.startswith("!")] or ["*"]
    return (any(fnmatch.fnmatchcase(name, s) for s in wanted)
            and not any(fnmatch.fnmatchcase(name, s[1:]) for s in globs if s.startswith("!")))


def _get(facts: dict, dotted: str):
    value = facts
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _plain(value):
    """A fact as a condition names it: TOML has no null, so None is ``"none"``."""
    return "none" if value is None else value


def _at(checkpoint: str, globs: tuple) -> bool:
    return any(fnmatch.fnmatchcase(checkpoint, g) for g in globs)


@dataclasses.dataclass(frozen=True)
class Bound:
    """A cause whose condition held for ``server`` when the fault struck."""

    cause: Cause
    server: str
    hosts: dict        # role -> host name, in the server's move


_LOADED: dict = {}


def load(path: str | None = None) -> list:
    """The causes in ``path`` (default: the env's file, else the repository's), parsed once
    per process and file version (every item is judged against them)."""
    path = path or os.environ.get(CAUSES_ENV) or CAUSES_FILE
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        return []
    if (path, stamp) not in _LOADED:
        _LOADED[(path, stamp)] = _parse(path)
    return _LOADED[(path, stamp)]


def named(names, kind: str = "root cause") -> list:
    """The causes called ``names``, in that order; an unknown name is one line
    (:class:`harness.errors.UnknownChoice` naming ``kind``), before anything runs."""
    from harness.errors import UnknownChoice
    by_name = {c.name: c for c in load()}
    for name in names:
        if name not in by_name:
            raise UnknownChoice(kind, name, list(by_name))
    return [by_name[name] for name in names]


def _parse(path: str) -> list:
    raw = files.read_toml(path)
    out, names = [], set()
    for i, c in enumerate(raw.get("cause", [])):
        out.append(_cause(c, f"{os.path.basename(path)}: cause[{i}]"))
        if out[-1].name in names:
            raise InvalidScenario(f"{os.path.basename(path)}: cause {out[-1].name!r} twice")
        names.add(out[-1].name)
    return out


def _listed(value) -> tuple:
    return tuple(value) if isinstance(value, list) else (value,)


def _cause(c: dict, where: str) -> Cause:
    unknown, missing = set(c) - _KEYS, {"name", "class", "title", "when"} - set(c)
    if unknown or missing:
        raise InvalidScenario(f"{where}: unknown keys {sorted(unknown)}, missing {sorted(missing)}")
    where = f"{where} ({c['name']})"
    if c["class"] not in CLASSES:
        raise InvalidScenario(f"{where}: class must be one of {CLASSES}")
    if not isinstance(c["when"], dict) or not c["when"]:
        raise InvalidScenario(f"{where}: when maps state keys (e.g. 'migration.status') to values")
    effects = []
    for e in c.get("effect", []):
        if set(e) - _EFFECT_KEYS or "at" not in e or "host" not in e or (
                ("lacks" in e) == ("counts" in e)):
            raise InvalidScenario(f"{where}: each effect has at, host, and lacks or counts "
                                  f"(a flavor: {_FLAVORS}), optionally cells ({_TOPOLOGIES}) "
                                  "and counters (false: the cells only)")
        flavor = e.get("lacks", e.get("counts"))
        cells = e.get("cells")
        if flavor not in _FLAVORS or cells not in (None, *_TOPOLOGIES):
            raise InvalidScenario(f"{where}: an effect's flavor is one of {_FLAVORS}, its "
                                  f"cells one of {_TOPOLOGIES}")
        if not e.get("counters", True) and cells is None:
            raise InvalidScenario(f"{where}: an effect without counters needs cells")
        consumer = e.get("consumer")
        if consumer is not None and (consumer not in _CONSUMERS or cells is not None
                                     or "counters" in e or "persists" in e):
            raise InvalidScenario(f"{where}: a placement effect names a consumer "
                                  f"({_CONSUMERS}), no cells, counters or persists")
        domain = e.get("domain")
        if domain is not None and (domain not in _DOMAINS or cells is None or consumer
                                   or "counters" in e or "persists" in e):
            raise InvalidScenario(f"{where}: a domain effect ({_DOMAINS}) names its cells, "
                                  "no consumer, counters or persists")
        parts = _listed(e.get("parts", list(PARTS)))
        if set(parts) - set(PARTS) or ("parts" in e and cells is None):
            raise InvalidScenario(f"{where}: an effect's parts name its cells' holdings {PARTS}")
        effects.append(Effect(_listed(e["at"]), e["host"], -1 if "lacks" in e else 1,
                              flavor, cells, bool(e.get("counters", True)) and not domain,
                              consumer, consumer is not None or domain is not None
                              or bool(e.get("persists", False)), domain,
                              tuple(p for p in PARTS if p in parts),
                              _listed(e.get("scenario", "*"))))
    expects = []
    for x in c.get("expect", []):
        if set(x) != _EXPECT_KEYS:
            raise InvalidScenario(f"{where}: each expect needs exactly {sorted(_EXPECT_KEYS)}")
        expects.append(Expect(_listed(x["at"]), x["check"], x["where"], _listed(x["seen"])))
    if not effects and not expects:
        raise InvalidScenario(f"{where}: a cause needs an effect or an expect")
    if c["class"] == "transient" and any(e.cells or e.consumer or e.domain for e in effects):
        raise InvalidScenario(f"{where}: a transient cause changes counters only (no cells, "
                              "no placement)")
    when = {k: _listed(v) for k, v in c["when"].items()}
    return Cause(c["name"], c["class"], c["title"], c.get("bug", ""), c.get("nova", ""),
                 _listed(c.get("fault", faults.periodic_globs())), _listed(c.get("scenario", "*")),
                 when, tuple(effects), tuple(expects), c.get("why", ""))


def bound(causes: list, item, state: dict) -> list:
    """The causes whose condition held for some server where the item's fault struck."""
    out = []
    for cause in causes:
        if not cause.covers(item):
            continue
        for facts_by_server in state.values():
            for server, facts in sorted(facts_by_server.items()):
                if isinstance(facts, dict) and cause.holds(facts):
                    out.append(Bound(cause, server, dict(facts.get("hosts", {}))))
    return _unique(out)


def _unique(bounds: list) -> list:
    seen, out = set(), []
    for b in bounds:
        key = (b.cause.name, b.server)
        if key not in seen:
            seen.add(key)
            out.append(b)
    return out


# -- judging -----------------------------------------------------------------

@dataclasses.dataclass
class Attribution:
    """An item's findings, each explained by a cause or left unknown."""

    known: list = dataclasses.field(default_factory=list)    # (Cause, checkpoint, Finding)
    unknown: list = dataclasses.field(default_factory=list)  # (checkpoint, Finding)
    bit: list = dataclasses.field(default_factory=list)      # cause names, in order
    held: list = dataclasses.field(default_factory=list)     # names whose condition held

    def owners(self) -> dict:
        """``id(finding)`` -> the name of the cause that explains it."""
        return {id(f): cause.name for cause, _, f in self.known}

    def summary(self) -> dict:
        """What a report keeps: the causes that bit, and those whose condition held."""
        return {"bit": list(self.bit), "held": list(self.held)} if self.held or self.bit else {}


def attribute(item, checkpoints, state: dict, causes: list, scenario) -> Attribution:
    """Explain ``checkpoints``' findings by the causes whose condition held (``state``).

    Per checkpoint, the subset of those causes whose effects, undone, leave
    nothing is chosen (the smallest, on ties the first); whatever no subset
    explains is unknown.
    """
    bounds = bound(causes, item, state or {})
    out = Attribution(held=list(dict.fromkeys(b.cause.name for b in bounds)))
    for cp in checkpoints:
        if not cp.findings:
            continue
        acting = [b for b in bounds if b.cause.acts_at(cp.name)]
        chosen, left = (), list(cp.findings)
        for size in range(1, min(len(acting), 4) + 1):
            for subset in itertools.combinations(acting, size):
                rest = residual(cp, subset, scenario)
                if len(rest) < len(left):
                    chosen, left = subset, rest
            if not left:
                break
        explained = [f for f in cp.findings if f not in left]
        for b in chosen:
            if b.cause.name not in out.bit:
                out.bit.append(b.cause.name)
        for f in explained:
            out.known.append((_owner(chosen, cp.name, f), cp.name, f))
        out.unknown += [(cp.name, f) for f in left]
    return out


def _owner(chosen: tuple, checkpoint: str, finding) -> Cause:
    """The chosen cause a finding is shown under: the one that names it, else the first."""
    for b in chosen:
        if any(_matches(x, b, checkpoint, finding) for x in b.cause.expects):
            return b.cause
    return chosen[0].cause


def residual(cp, subset: tuple, scenario) -> list:
    """``cp``'s findings that the effects of ``subset`` (undone) and its expects do not
    account for. An expect may name a view's finding too (what the effects cannot state
    exactly: a tracker holding none of a topology Nova never chose)."""
    effects = [(b, e) for b in subset for e in b.cause.effects
               if _at(cp.name, e.at) and e.shows_in(scenario.name)]
    named = [f for f in cp.findings if not _from_views(f)]
    if not effects or cp.evidence is None:
        seen = [f for f in cp.findings if _from_views(f)]
    else:
        ev = cp.evidence
        snap, after = copy.deepcopy(ev.snap), copy.deepcopy(ev.after)
        for b, e in effects:
            if not _undo(snap, ev, b, e, scenario):
                return list(cp.findings)  # the effect names a host this move has not
            if after is not None and e.persists:
                _undo(after, ev, b, e, scenario)
        ctx = ev.context(snap)
        seen = checks.run_ledger(ctx)
        if after is not None:
            seen += [checks.Finding("convergence", f"periodic changed {path}", old, new)
                     for path, old, new in checks.diff_snapshots(snap, after)]
    return [f for f in seen + named
            if not any(_matches(x, b, cp.name, f) for b in subset for x in b.cause.expects)]


def _from_views(finding) -> bool:
    """Whether a finding comes from the views a checkpoint keeps (checked again there)."""
    if finding.check in checks.LEDGER:
        return True
    return finding.check == "convergence" and not finding.where.startswith("log lines")


def _matches(x: Expect, b: Bound, checkpoint: str, finding) -> bool:
    if finding.check != x.check or not _at(checkpoint, x.at):
        return False
    try:
        where = x.where.format(server=b.server, **b.hosts)
    except (KeyError, IndexError):
        return False
    value = checks.value_of(finding)
    return (fnmatch.fnmatchcase(finding.where, where)
            and any(fnmatch.fnmatchcase(value, s) for s in x.seen))


def flavors_of(scenario, server: str) -> dict:
    """``{"old": its boot flavor, "new": its move's}`` (the same when the move keeps it)."""
    boot = next(s for s in scenario.boots if s.server == server)
    move = next((s for s in scenario.moves if s.server == server), None)
    old = scenario.flavors[boot.flavor]
    new = scenario.flavors[move.flavor] if move is not None and move.flavor else old
    return {"old": old, "new": new}


def _undo(snap: dict, ev, b: Bound, e: Effect, scenario) -> bool:
    """Give ``e``'s host back what the effect took (or take what it added). False: no such host."""
    host = b.hosts.get(e.host)
    if host is None or host not in snap["rt"]:
        return False
    flavor = flavors_of(scenario, b.server)[e.flavor]
    if e.consumer is not None:
        _undo_allocation(snap["placement"], f"{b.server} {e.consumer}", host,
                         -e.sign, placement_resources(flavor))
        pci_undo.shift_allocation(snap, f"{b.server} {e.consumer}", host, -e.sign, flavor)
        return True
    sign = -e.sign  # undoing
    numa = snap["numa"].get(b.server) or {}
    cells = (numa.get(e.cells) or ev.chosen.get(b.server, {}).get(e.cells) or []) if e.cells else []
    if e.domain is not None:
        truth = snap["truth"][host]
        kinds = ("defined", "running") if e.domain == "running" else ("defined",)
        for kind in kinds:
            _shift_cells(truth[kind], cells, sign, e.parts)
        pci_undo.shift_domains(snap, host, b.server, flavor, kinds, sign)  # its hostdevs
        return True
    view = snap["rt"][host]
    if e.counters:
        view["vcpus_used"] += sign * flavor.vcpus
        view["memory_mb_used"] += sign * flavor.memory_mb
        # a tracker that counts (lacks) a flavor holds (frees) its PCI devices too
        (pci_undo.free_held if sign < 0 else pci_undo.hold_domains)(snap, host, b.server, flavor)
    _shift_cells(view["cells"], cells, sign, e.parts)
    return True


def _shift_cells(view: dict, cells: list, sign: int, parts: tuple = PARTS) -> None:
    """Add (``sign`` +1) or take a guest's ``cells`` (those ``parts`` of them) to a host's
    per-cell view."""
    for c in cells:
        cell = view.get(c["cell"])
        if cell is None:  # Nova counts a guest cell only where the host has a cell of its id
            continue
        if "cpus" in parts:
            cpus = set(cell["cpus"])
            cell["cpus"] = sorted(cpus | set(c["cpus"]) if sign > 0 else cpus - set(c["cpus"]))
        for size, n in c["pages"].items() if "pages" in parts else ():
            left = cell["pages"].get(size, 0) + sign * n
            if left:
                cell["pages"][size] = left
            else:
                cell["pages"].pop(size, None)
        cell["pages"] = dict(sorted(cell["pages"].items()))
        for key in ("small_pages", "memory_mb", "shared"):
            if key in parts:
                cell[key] += sign * c[key]


def _undo_allocation(view: dict, consumer: str, host: str, sign: int, resources: dict) -> None:
    """Add (``sign`` +1) or take ``resources`` to ``consumer``'s allocation on ``host``
    and to the host's provider usages (a consumer the view did not read: usages only)."""
    def shift(amounts: dict) -> dict:
        out = collections.Counter(amounts)
        for rc, n in resources.items():
            out[rc] += sign * n
        return {rc: n for rc, n in sorted(out.items()) if n}
    allocations = view["allocations"].get(consumer)
    if allocations is not None:
        allocations[host] = shift(allocations.get(host, {}))
        if not allocations[host]:
            del allocations[host]
        view["allocations"][consumer] = dict(sorted(allocations.items()))
    view["usages"][host] = shift(view["usages"].get(host, {}))


def describe(cause: Cause) -> str:
    return f"{cause.name} ({cause.klass}): {cause.title}"
