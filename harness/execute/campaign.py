"""Items of a campaign, running one, and deciding its verdict.

An item is (scenario, point id, target, ending[, window][, mutation]). Its id
is plain text, the same everywhere, and is all ``nova-chaos replay`` needs.
Discovery (:mod:`harness.execute.discovery`) lists the points per ending --
the *traces* -- that items are made of.
"""
from __future__ import annotations

import dataclasses
import time

import fixtures

from harness import scenario as scenario_mod
from harness.cloud import mutations
from harness.execute import discovery, runner
from harness.execute.item import Item
from harness.execute.record import PROVED_NOTHING, Problem, Record
from harness.explore import injection
from harness.oracles import causes as causes_mod, known
from harness import faults
from harness.errors import UnknownChoice
from harness.explore.tracer import DEFAULT_WINDOW

def trace_key(scenario: str, window: str) -> str:
    """Key of one scenario+window's traces in the ``{key: traces}`` maps executors pass."""
    return f"{scenario}|{window}"


def union(traces: dict) -> list:
    """Every point of every ending's trace, once, in first-seen order."""
    return list(dict.fromkeys(p for trace in traces.values() for p in trace))


def targets_for(scen) -> tuple:
    """One host plays both roles in a same-host scenario: one target; an
    operation without a source host (unshelve) has only its destination."""
    return ("source",) if scen.same_host else scen.operation.targets


def choose(scen, targets=None, endings=None) -> tuple:
    """The wanted targets and endings this scenario has (all of them when none is wanted).

    A same-host scenario has one target, a scenario may list fewer endings:
    a wish list spanning scenarios (``run all --target dest``) keeps each
    scenario's own.
    """
    own_targets, own_endings = targets_for(scen), tuple(scen.endings)
    return ([t for t in targets or own_targets if t in own_targets],
            [e for e in endings or own_endings if e in own_endings])


def same_points(outer: list, inner: list) -> dict:
    """``{outer id: inner id}`` for the calls a narrower window's trace shares with a wider one.

    Occurrence counters restart where each window opens, so the same call
    can have two ids (``Flavor._load_projects#4`` in the lifecycle is ``#1``
    in the card's window): the match is by position, the inner trace with
    counters stripped found as one run inside the outer. ``{}`` if it is not there.
    """
    bare = [p.rsplit("#", 1)[0] for p in outer]
    want = [p.rsplit("#", 1)[0] for p in inner]
    for start in range(len(bare) - len(want) + 1):
        if want and bare[start:start + len(want)] == want:
            return dict(zip(outer[start:start + len(want)], inner))
    return {}


def as_narrower(wider: list, wider_traces: dict, narrower_window: str,
                narrower_traces: dict) -> list:
    """``wider``'s items, with every call a narrower window also has named as it is there.

    The same call with the same target and ending is the same experiment
    whatever the window is called (the lifecycle's core *is* the card's
    window), so it has one id, the narrower window's: known findings and
    replay commands name it once, whichever windows a run asked for.
    """
    maps = {e: same_points(wider_traces[e], narrower_traces.get(e, [])) for e in wider_traces}
    return [dataclasses.replace(i, point=maps[i.ending][i.point], window=narrower_window)
            if i.point in maps[i.ending] else i for i in wider]


def items(scen, traces, targets=None, endings=None, mutation=None, points=None,
          window: str = DEFAULT_WINDOW, fault: str = faults.DEFAULT) -> list:
    """The campaign's items, point by point (then target, then ending): where the fault
    strikes (:meth:`harness.faults.base.Fault.reached`, ``strikes``)."""
    endings = endings or scen.endings
    targets = targets or targets_for(scen)
    chosen = points or union(traces)
    kind = faults.parse(fault)
    reached = kind.reached(traces, list(endings))
    return [Item(scen.name, p, t, e, mutation, window, fault) for p in chosen
            for t in kind.strikes(scen, p, targets) for e in endings if p in reached[e]]


def validate(scen, traces, targets, endings, point_ids, mutation, window=DEFAULT_WINDOW,
             fault=faults.DEFAULT):
    discovery.check_window(window)
    faults.parse(fault).refuse(scen)
    for t in targets:
        if t not in targets_for(scen):
            raise UnknownChoice(f"target for {scen.name}", t, targets_for(scen))
    for e in endings:
        if e not in scen.endings:
            raise UnknownChoice(f"ending for {scen.name}", e, scen.endings)
    known_points = union(traces)
    for p in point_ids:
        if p not in known_points:
            raise UnknownChoice(f"point of {scen.name} (window {window})", p, known_points)
    if mutation:
        mutations.get(mutation)


def run_item(item: Item, traces: dict | None = None, entries=None,
             timeout: float = 180.0, detail: bool = False) -> Record:
    """Run one item in a fresh environment and judge it (known findings applied strictly)."""
    scen = scenario_mod.load(item.scenario)
    inj = injection.Injection(item.point, item.target, item.fault, detail=detail)
    # a restart freezes a thread of the one-thread cloud, in every mode (harness.explore.restart)
    run = runner.Run(scen, item.ending, converge_every=False, timeout=timeout,
                     one_thread=faults.parse(item.fault).one_thread)

    class Instrument(fixtures.Fixture, runner.Hooks):
        """Nova broken first (if asked), then traced; the run's hooks are the injector's."""

        def _setUp(self):
            self.injector = self.useFixture(injection.Injector(run, inj, item.window,
                                                               mutation=item.mutation))

        def before_check(self, run, name):
            self.injector.before_check(run, name)

        def after_crash(self, run, crash):
            self.injector.after_crash(run, crash)

    started = time.monotonic()
    run.execute(lambda r: Instrument())
    return judge(item, run, inj, traces, entries, started)


def judge(item: Item, run, inj, traces, entries, started) -> Record:
    """Decide an item's verdict from its finished run (wherever it ran).

    ``error``: the item proved nothing -- the run stopped short of a planned
    checkpoint, or left the recorded trace before its point. ``fail``: it
    ran through and something is wrong (a finding no entry covers, a stale
    entry, an injection that did not fire on every target). Otherwise
    ``known`` or ``pass``.
    """
    expected_trace = traces.get(item.ending) if traces else None
    result = run.result
    trace = [p.id for p in run.tracer.points] if run.tracer else []
    problems = stopped_short(run)
    if expected_trace is not None and item.point in expected_trace:
        # the run must follow the recorded trace up to the point (determinism)
        upto = expected_trace.index(item.point) + 1
        if trace[:upto] != expected_trace[:upto]:
            diverged = next((i for i, (a, b) in enumerate(zip(trace, expected_trace)) if a != b),
                            min(len(trace), upto))
            problems.append(Problem(
                "diverged-trace",
                f"error: nondeterministic trace: expected point {expected_trace[diverged]!r} "
                f"at step {diverged + 1}, run reached "
                f"{trace[diverged] if diverged < len(trace) else 'the end'!r}"))
    if not inj.fired_at:
        problems.append(Problem("missed-injection",
                                f"injection did not fire: point {item.point} was not reached"))
    else:
        reached = {cp.name for cp in result.checkpoints}
        problems += [Problem("missed-injection", text) for text in
                     faults.parse(item.fault).missed(inj.fired_at, inj.hosts, reached)]
    verdict, problems, known_lines, why = _verdict(
        item, result.checkpoints, problems, known.load() if entries is None else entries,
        inj.state)
    return Record(item, verdict, problems, known_lines, time.monotonic() - started,
                  inj.fired_at, findings_json(result.checkpoints, why.owners()),
                  result.warnings() if verdict in ("fail", "error") else [],
                  result.checkpoints, trace, inj.changes, state=inj.state,
                  causes=why.summary())


def stopped_short(run) -> list:
    """Why ``run`` proved nothing: it stopped, or never reached a planned checkpoint."""
    result, problems = run.result, []
    if result.error:
        problems.append(Problem("error", f"error: {result.first_problem()}"))
    missing = result.missing(run.planned())
    if missing:
        problems.append(Problem("error", f"error: never reached checkpoint {', '.join(missing)}"
                                + ("" if result.error else f" (the run ended at {run.where})")))
    return problems


def judge_uninjected(scenario: str, ending: str, mutation, run) -> Record:
    """The verdict of an uninjected run (:func:`harness.execute.discovery.uninjected_run`).

    No fault was injected, so only a root cause of the fault ``none`` (a
    defect of Nova's own path, reviewed) explains what it shows, its
    condition over the state the deletes met. ``error``: it stopped short of
    a planned checkpoint; ``fail``: it ran through and a check saw what no
    such cause explains. Either way, and when a cause explains it (``known``),
    the Nova under test shows a defect without any injection: the campaign's
    first finding.
    """
    item = Item.uninjected(scenario, ending, mutation)
    result = run.result
    state = {f"deletes@{host}": facts for host, facts in (run.delete_state or {}).items()}
    verdict, problems, known_lines, why = _verdict(
        item, result.checkpoints, stopped_short(run), [], state)
    return Record(item, verdict, problems, known_lines, result.seconds, [],
                  findings_json(result.checkpoints, why.owners()),
                  result.warnings() if verdict in ("fail", "error") else [],
                  result.checkpoints, state=state, causes=why.summary())


def findings_json(checkpoints, owners: dict | None = None) -> list:
    """The findings as reports keep them; ``owners``: ``id(finding)`` -> the root cause
    that explains it (its name is kept with the finding)."""
    owners = owners or {}
    return [{"checkpoint": cp.name, "check": f.check, "where": f.where,
             "expected": repr(f.expected), "seen": repr(f.seen),
             "value": known.value_of(f), "class": known.classify(f),
             **({"cause": owners[id(f)]} if id(f) in owners else {})}
            for cp in checkpoints for f in cp.findings]


def _verdict(item, checkpoints, problems, entries, state=None, stored=None) -> tuple:
    """``(verdict, problems, known lines, attribution)``: the run's own problems plus
    what its findings say. Root causes explain findings first (their condition on
    ``state``; ``stored``: a stored report's findings, already attributed); the
    known-findings entries then see what is left."""
    crashed = any(p.kind in PROVED_NOTHING for p in problems)
    why = (causes_mod.attribute(item, checkpoints, state, causes_mod.load(),
                                _scenario(item.scenario)) if stored is None else stored)
    left = {}
    for cp, f in why.unknown:
        left.setdefault(cp, runner.Checkpoint(cp, [])).findings.append(f)
    unknown, stale, known_pairs = known.judge(item, list(left.values()), entries)
    problems = problems + [Problem("finding", f"{known.classify(f)} finding at {cp}: {f.line()}")
                           for cp, f in unknown]
    if not crashed:  # a run that stopped early cannot show what an entry expects later
        problems += [Problem("stale-known", f"known finding no longer reproduces: {e.describe(i)}")
                     for e, i in stale]
    verdict = ("error" if crashed else
               "fail" if problems else "known" if known_pairs or why.known else "pass")
    lines = [f"{c.klass} {c.name} at {cp}: {f.line()}" for c, cp, f in why.known]
    lines += [f"{e.klass}: {f.line()} ({e.reason})" for e, f in known_pairs]
    return verdict, problems, lines, why


_SCENARIOS: dict = {}


def _scenario(name: str):
    if name not in _SCENARIOS:
        _SCENARIOS[name] = scenario_mod.load(name)
    return _SCENARIOS[name]


def predates_causes(records: list) -> bool:
    """Whether a stored report was judged before root causes (issue 30): a known item of a
    periodic fault that names no cause. Its findings cannot be attributed again (a cause's
    condition is over the state the fault met, which such a report did not keep)."""
    return any(r.get("verdict") == "known" and not r.get("causes")
               and faults.parse(Item.parse(r["id"]).fault).periodic for r in records)


def rejudge(record: dict, entries) -> dict:
    """A stored item result (report JSON) judged again against ``entries``.

    Known findings are reviewed after long campaigns; the findings in a
    report are all that judging needs, so nothing is run again. A finding a
    root cause explained keeps it while the cause is in the file (the views
    its effect was checked against are not kept: changing an effect needs a
    run). Problems that did not come from findings (errors, a missed point,
    a diverged trace) stay.
    """
    from harness.execute.runner import Checkpoint
    if record["verdict"] == "error" or Item.parse(record["id"]).is_uninjected:
        return record  # nothing was judged, or no entry can explain it: it stays as it was
    by_name = {c.name: c for c in causes_mod.load()}
    why = causes_mod.Attribution()
    checkpoints = {}
    for f in record.get("findings", []):
        finding = known.stored_finding(f)
        checkpoints.setdefault(f["checkpoint"], Checkpoint(f["checkpoint"], [])).findings.append(
            finding)
        cause = by_name.get(f.get("cause"))
        if cause is not None:
            why.known.append((cause, f["checkpoint"], finding))
        else:
            why.unknown.append((f["checkpoint"], finding))
    stored = record.get("causes", {})
    why.bit = [n for n in stored.get("bit", []) if n in by_name]
    why.held = [n for n in stored.get("held", []) if n in by_name]
    own = [p for p in map(Problem.from_json, record["problems"])
           if p.kind not in ("finding", "stale-known")]
    verdict, problems, known_lines, why = _verdict(
        Item.parse(record["id"]), list(checkpoints.values()), own, entries, stored=why)
    return dict(record, verdict=verdict, problems=[p.to_json() for p in problems],
                known=known_lines, causes=why.summary())
