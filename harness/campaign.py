"""Items of a campaign, running one, and deciding its verdict.

An item is (scenario, point id, target, ending[, mutation]). Its id is plain
text, the same everywhere, and is all ``nova-chaos replay`` needs.
Discovery (a recording run without injection) lists the points; it is
cached on disk keyed by everything that could change the answer.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import time

import fixtures

from harness import injection, known, mutations, runner, scenario as scenario_mod
from harness.errors import UnknownChoice, UsageError

SEP = "/"
CACHE_DIR = os.environ.get("NOVA_CHAOS_CACHE", os.path.join(tempfile.gettempdir(), "nova-chaos-cache"))


@dataclasses.dataclass(frozen=True)
class Item:
    scenario: str
    point: str
    target: str
    ending: str
    mutation: str | None = None

    @property
    def id(self) -> str:
        base = SEP.join((self.scenario, self.point, self.target, self.ending))
        return base + (f"{SEP}mutate={self.mutation}" if self.mutation else "")

    @classmethod
    def parse(cls, text: str) -> "Item":
        parts = text.split(SEP)
        mutation = None
        if parts and parts[-1].startswith("mutate="):
            mutation = parts.pop()[len("mutate="):]
        if len(parts) != 4:
            raise UsageError(f"bad item id {text!r}; expected SCENARIO/POINT/TARGET/ENDING[/mutate=NAME]")
        return cls(*parts, mutation=mutation)

    def replay_command(self) -> str:
        return f"nova-chaos replay '{self.id}'"


@dataclasses.dataclass
class ItemResult:
    item: Item
    verdict: str            # pass | known | fail | error
    checkpoints: list
    problems: list          # lines saying why it failed
    known: list             # lines of the known findings it showed
    fired: list
    seconds: float
    trace: list             # point ids reached, in order

    def to_json(self) -> dict:
        return {
            "id": self.item.id, "verdict": self.verdict, "seconds": round(self.seconds, 3),
            "fired": self.fired, "problems": self.problems, "known": self.known,
            "findings": [{"checkpoint": cp.name, "check": f.check, "where": f.where,
                          "expected": repr(f.expected), "seen": repr(f.seen),
                          "class": known.classify(f)} for cp in self.checkpoints for f in cp.findings],
            "replay": self.item.replay_command(),
        }


def _cache_path(scen, backend: str, window: str) -> str:
    """Where discovery for this exact input is cached; computed without importing Nova.

    The key covers the scenario file, the harness's own code, and the Nova
    that ``import nova`` would load (location, version, and its compute
    manager / resource tracker sources, so an edited checkout is noticed).
    """
    import importlib.util
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    files = [scen.path] + [os.path.join(here, n) for n in sorted(os.listdir(here)) if n.endswith(".py")]
    spec = importlib.util.find_spec("nova")
    if spec and spec.origin:
        pkg = os.path.dirname(spec.origin)
        files += [os.path.join(pkg, "compute", "manager.py"),
                  os.path.join(pkg, "compute", "resource_tracker.py")]
        h.update(pkg.encode())
    for path in files:
        if os.path.exists(path):
            with open(path, "rb") as fh:
                h.update(fh.read())
    h.update(f"{backend}|{window}".encode())
    return os.path.join(CACHE_DIR, f"{scen.name}-{h.hexdigest()[:16]}.json")


def discover(scen, window: str = "resize", use_cache: bool = True) -> list:
    """Point ids reached, in order, by an uninjected run of ``scen`` (imports Nova)."""
    from harness import nova_support
    path = _cache_path(scen, nova_support.current_backend(), window)
    if use_cache and os.path.exists(path):
        with open(path) as fh:
            return json.load(fh)
    run = runner.Run(scen, scen.endings[0], converge_every=False)
    result = run.execute(lambda r: injection.Injector(r, None, window))
    if not result.passed:
        raise UsageError(f"scenario {scen.name}: the uninjected run fails, nothing to sweep:\n"
                         + result.report())
    points = [p.id for p in run.tracer.points]
    os.makedirs(CACHE_DIR, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=CACHE_DIR)
    with os.fdopen(fd, "w") as fh:
        json.dump(points, fh)
    os.replace(tmp, path)  # atomic: parallel workers may race here
    return points


def points_without_nova(scen, backend: str, window: str = "resize") -> list:
    """Like :func:`discover`, but never imports Nova in this process.

    pytest collection uses it: importing Nova (and eventlet's monkey
    patching) inside an xdist worker during collection hangs the worker's
    channel. A cache miss runs ``nova-chaos points`` in a subprocess.
    """
    path = _cache_path(scen, backend, window)
    if not os.path.exists(path):
        import subprocess
        import sys
        proc = subprocess.run(
            [sys.executable, "-m", "harness", "points", scen.path, "--backend", backend],
            capture_output=True, text=True, timeout=600,
            env=dict(os.environ, PYTHONWARNINGS="ignore"))
        if proc.returncode != 0 or not os.path.exists(path):
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise UsageError(f"discovery of {scen.name} failed: {last}")
    with open(path) as fh:
        return json.load(fh)


def items(scen, points, targets=injection.TARGETS, endings=None, mutation=None) -> list:
    endings = endings or scen.endings
    return [Item(scen.name, p, t, e, mutation) for p in points for t in targets for e in endings]


def validate(scen, points, targets, endings, point_ids, mutation):
    for t in targets:
        if t not in injection.TARGETS:
            raise UnknownChoice("target", t, injection.TARGETS)
    for e in endings:
        if e not in scen.endings:
            raise UnknownChoice(f"ending for {scen.name}", e, scen.endings)
    for p in point_ids:
        if p not in points:
            raise UnknownChoice(f"point of {scen.name}", p, points)
    if mutation:
        mutations.get(mutation)


def run_item(item: Item, expected_trace: list | None = None, entries=None,
             window: str = "resize", timeout: float = 180.0, detail: bool = False) -> ItemResult:
    """Run one item and judge it (known findings applied strictly)."""
    scen = scenario_mod.load(item.scenario)
    inj = injection.Injection(item.point, item.target, detail=detail)
    run = runner.Run(scen, item.ending, converge_every=False, timeout=timeout)

    class Instrument(fixtures.Fixture):
        def _setUp(self):
            if item.mutation:
                self.useFixture(mutations.get(item.mutation)())
            self.useFixture(injection.Injector(run, inj, window))

    started = time.monotonic()
    run.execute(lambda r: Instrument())
    return judge(item, run, inj, expected_trace, entries, started)


def judge(item: Item, run, inj, expected_trace, entries, started) -> ItemResult:
    """Decide an item's verdict from its finished run (wherever it ran)."""
    result = run.result
    trace = [p.id for p in run.tracer.points] if run.tracer else []
    problems = []
    if result.error:
        problems.append(f"error: {result.error}")
    if not inj.fired_at:
        problems.append(f"injection did not fire: point {item.point} was not reached")
    if expected_trace is not None and item.point in expected_trace:
        # the run must follow the recorded trace up to the point (determinism)
        upto = expected_trace.index(item.point) + 1
        if trace[:upto] != expected_trace[:upto]:
            diverged = next((i for i, (a, b) in enumerate(zip(trace, expected_trace)) if a != b),
                            min(len(trace), upto))
            problems.append(
                f"nondeterministic trace: expected point {expected_trace[diverged]!r} "
                f"at step {diverged + 1}, run reached "
                f"{trace[diverged] if diverged < len(trace) else 'the end'!r}")
    unknown, stale, known_pairs = known.judge(item, result.checkpoints,
                                              known.load() if entries is None else entries)
    problems += [f"{known.classify(f)} finding at {cp}: {f.line()}" for cp, f in unknown]
    problems += [f"known finding no longer reproduces: {e.describe(i)}" for e, i in stale]
    verdict = ("error" if result.error and not result.checkpoints else
               "fail" if problems else "known" if known_pairs else "pass")
    out = ItemResult(item, verdict, result.checkpoints, problems,
                     [f"{e.klass}: {f.line()} ({e.reason})" for e, f in known_pairs],
                     inj.fired_at, time.monotonic() - started, trace)
    out.changes = inj.changes
    return out
