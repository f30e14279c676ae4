"""The oracles: named checks that compare the views with the ledger.

Each check is a plain function ``(ctx) -> list[Finding]`` registered with
:func:`check`, in the spirit of Hypothesis's ``@invariant``: the runner calls
every registered check at every checkpoint, so a check cannot be forgotten at
one phase. A finding carries host/cell, expected and seen, so a report reads
as a diff.
"""
from __future__ import annotations

import collections
import copy
import dataclasses
import re

CHECKS: dict = {}

#: log lines that are evidence of an accounting failure even when nothing raised
LOG_PATTERNS = (
    re.compile(r"CPUUnpinningInvalid"),
    re.compile(r"CPUPinningInvalid"),
    re.compile(r"Error updating resources for node"),
    re.compile(r"MemoryPagesUnsupported|MemoryPageSizeNotSupported"),
)


@dataclasses.dataclass(frozen=True)
class Finding:
    check: str
    where: str      # e.g. "host-a cell 0 pinned cpus"
    expected: object
    seen: object

    def line(self) -> str:
        return f"[{self.check}] {self.where}: expected {self.expected!r}, seen {self.seen!r}"


@dataclasses.dataclass
class CheckContext:
    """What a check may look at: the cloud, the phase's ledger, the views."""

    cloud: object
    phase: object          # ledger.Phase
    snap: dict             # views.snapshot()
    exact_cells: bool      # domains settled: RT cells must equal defined domains
    reserved_mb: int
    log_text: str
    chosen: dict = dataclasses.field(default_factory=dict)  # server -> {"current"/"old"/"new": cells} seen last


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What a checkpoint's checks read, as plain data (it travels with memoized
    continuations): a root cause's effect is undone on it and the checks run again."""

    phase: object
    snap: dict
    exact_cells: bool
    reserved_mb: int
    chosen: dict
    after: dict | None   # the views after the convergence periodic, if it ran

    @classmethod
    def of(cls, ctx, after) -> "Evidence":
        return cls(ctx.phase, ctx.snap, ctx.exact_cells, ctx.reserved_mb,
                   copy.deepcopy(ctx.chosen), after)

    def context(self, snap) -> CheckContext:
        return CheckContext(None, self.phase, snap, self.exact_cells, self.reserved_mb, "",
                            self.chosen)


def check(name: str):
    """Register a check under ``name`` (its id in reports and known findings)."""
    def deco(fn):
        CHECKS[name] = fn
        fn.check_name = name
        return fn
    return deco


def _cmp(out, name, where, expected, seen):
    if expected != seen:
        out.append(Finding(name, where, expected, seen))


#: per-cell usage beside pins and hugepages: (view key, how findings name it)
_CELL_USAGE = (("small_pages", "small pages"), ("memory_mb", "guest memory MiB"),
               ("shared", "floating vCPUs"))


def _pages_total(cells: dict) -> dict:
    total = collections.Counter()
    for cell in cells.values():
        total.update(cell["pages"])
    return dict(sorted((k, v) for k, v in total.items() if v))


@check("rt")
def rt_matches_ledger(ctx) -> list:
    """The resource tracker holds exactly the ledger, per host and per cell.

    Inside a step (``phase.between``) each host must hold exactly what one
    of the settled phases around it says: a host that holds less than both
    (the 1944759 drop) or a mix of the two is a finding, reported against
    the nearer phase.
    """
    out = []
    for host, view in sorted(ctx.snap["rt"].items()):
        out += _against_phase(ctx, lambda phase: _rt_host(ctx, phase, host, view))
    return out


def _against_phase(ctx, check_one) -> list:
    """``check_one(phase) -> (name, findings)`` against the checkpoint's ledger, or its nearest side.

    A settled phase is judged as it is; inside a step, no findings if one of
    the phases around it holds, else those of the one with fewest (the
    first on ties), named after it.
    """
    if ctx.phase.holdings is not None:
        return check_one(ctx.phase)[1]
    best = None
    for phase_name, found in map(check_one, ctx.phase.between):
        if not found:
            return []
        if best is None or len(found) < len(best[1]):
            best = (phase_name, found)
    if best is None:  # no ledger: only the ledger-free checks apply
        return []
    return [dataclasses.replace(f, where=f"{f.where} (nearest: {best[0]})") for f in best[1]]


def _rt_host(ctx, phase, host, view):
    out = []
    want = phase.held(host)
    pinned = sum(len(c["cpus"]) for c in view["cells"].values())
    _cmp(out, "rt", f"{host} pinned pCPUs", want.pinned, pinned)
    _cmp(out, "rt", f"{host} hugepages used", dict(sorted(want.pages.items())),
         _pages_total(view["cells"]))
    _cmp(out, "rt", f"{host} small pages used", want.small_pages,
         sum(c["small_pages"] for c in view["cells"].values()))
    _cmp(out, "rt", f"{host} vcpus_used", want.vcpus, view["vcpus_used"])
    _cmp(out, "rt", f"{host} memory_mb_used", ctx.reserved_mb + want.memory_mb,
         view["memory_mb_used"])
    # exact per cell at every checkpoint with a ledger, mid-move included
    want_cells = _topology_cells(ctx, phase).get(host, {})
    for cell in sorted(set(want_cells) | set(view["cells"])):
        want_cell, seen = want_cells.get(cell, _empty_cell()), view["cells"].get(cell, _empty_cell())
        for key, what in (("cpus", "pinned cpus"), ("pages", "hugepages used")) + _CELL_USAGE:
            _cmp(out, "rt", f"{host} cell {cell} {what} (vs NUMA topologies)",
                 dict(sorted(want_cell[key].items())) if key == "pages" else want_cell[key],
                 seen[key])
    if ctx.exact_cells:
        defined = ctx.snap["truth"][host]["defined"]
        shadowed = phase.shadowed(host)  # then domains are a lower bound only
        for cell in sorted(defined):
            seen = view["cells"].get(cell, {"cpus": [], "pages": {}})
            if shadowed:
                _cmp(out, "rt", f"{host} cell {cell} domain pCPUs the RT does not hold",
                     [], sorted(set(defined[cell]["cpus"]) - set(seen["cpus"])))
                continue
            _cmp(out, "rt", f"{host} cell {cell} pinned cpus (vs domains)",
                 defined[cell]["cpus"], seen["cpus"])
            _cmp(out, "rt", f"{host} cell {cell} hugepages used (vs domains)",
                 defined[cell]["pages"], seen["pages"])
            for key, what in _CELL_USAGE:
                _cmp(out, "rt", f"{host} cell {cell} {what} (vs domains)",
                     defined[cell][key], seen.get(key, 0))
    return phase.name, out


def _topology_cells(ctx, phase) -> dict:
    """host -> cell -> what the guests held there should occupy, from their NUMA topologies.

    Each holding stands for the topology Nova gave it (``Holding.topology``):
    the move's old one (in the migration context), its new one, or the
    instance's current one. The ledger says who holds on which host; Nova's
    claims say which pCPUs and pages. Once the migration context is gone a
    host may still (inside a step, rightly) hold the move's flavor: the
    topologies Nova chose are then the ones the run saw last (``ctx.chosen``).
    """
    out: dict = collections.defaultdict(lambda: collections.defaultdict(_empty_cell))
    for h in phase.holdings:
        numa = ctx.snap["numa"].get(h.server)
        if numa is None:
            continue
        cells = numa["current"]
        if h.topology != "current":
            seen_last = ctx.chosen.get(h.server, {}).get(h.topology)
            cells = next(c for c in (numa[h.topology], seen_last, cells) if c is not None)
        for c in cells:
            mine = out[h.host][c["cell"]]
            mine["cpus"] = sorted(set(mine["cpus"]) | set(c["cpus"]))
            for size, n in c["pages"].items():
                mine["pages"][size] = mine["pages"].get(size, 0) + n
            mine["small_pages"] += c["small_pages"]
            mine["memory_mb"] += c["memory_mb"]
            mine["shared"] += c["shared"]
    return out


def _empty_cell() -> dict:
    return {"cpus": [], "pages": {}, "small_pages": 0, "memory_mb": 0, "shared": 0}


@check("placement")
def placement_matches_ledger(ctx) -> list:
    """Placement allocations per consumer per provider, and provider usages."""
    return _against_phase(ctx, lambda phase: _placement(ctx, phase))


def _placement(ctx, phase):
    out = []
    want = phase.allocations()
    seen = ctx.snap["placement"]["allocations"]
    for kind in sorted(set(want) | set(seen)):
        _cmp(out, "placement", f"allocations of {kind}", want.get(kind, {}), seen.get(kind, {}))
    usage = collections.defaultdict(collections.Counter)
    for per_host in want.values():
        for host, resources in per_host.items():
            usage[host].update(resources)
    for host, seen_usage in sorted(ctx.snap["placement"]["usages"].items()):
        _cmp(out, "placement", f"{host} provider usages", dict(sorted(usage[host].items())), seen_usage)
    return phase.name, out


@check("truth")
def ground_truth(ctx) -> list:
    """Running domains hold the ledger's running flavors, all tracked by the RT."""
    out = []
    for host, truth in sorted(ctx.snap["truth"].items()):
        running = truth["running"]
        pinned = sum(len(c["cpus"]) for c in running.values())
        if ctx.exact_cells and ctx.phase.holdings is not None:
            want = ctx.phase.running(host)
            _cmp(out, "truth", f"{host} pCPUs pinned by running domains", want.pinned, pinned)
            _cmp(out, "truth", f"{host} hugepages held by running domains",
                 dict(sorted(want.pages.items())), _pages_total(running))
            _cmp(out, "truth", f"{host} small pages held by running domains", want.small_pages,
                 sum(c["small_pages"] for c in running.values()))
        rt_cells = ctx.snap["rt"][host]["cells"]
        for cell, held in sorted(running.items()):
            rt = rt_cells.get(cell, {"cpus": [], "pages": {}})
            untracked = sorted(set(held["cpus"]) - set(rt["cpus"]))
            _cmp(out, "truth", f"{host} cell {cell} pCPUs pinned on the host but free in the RT",
                 [], untracked)
            over = {s: n - rt["pages"].get(s, 0) for s, n in held["pages"].items()
                    if n > rt["pages"].get(s, 0)}
            _cmp(out, "truth", f"{host} cell {cell} hugepages held on the host beyond the RT", {}, over)
            for key, what in _CELL_USAGE:  # a silently clamped double free shows here
                _cmp(out, "truth", f"{host} cell {cell} {what} held on the host beyond the RT",
                     0, max(0, held[key] - rt.get(key, 0)))
    return out


@check("liveness")
def liveness(ctx) -> list:
    """Server, task and migration states are the phase's; nothing in ERROR."""
    from harness.oracles import views
    out = []
    for name, (status, migration_status) in sorted(ctx.phase.status.items()):
        if status == "ANY":
            continue
        if status == "DELETED":
            _cmp(out, "liveness", f"server {name} deleted", True, ctx.cloud.gone(name))
            continue
        server = ctx.cloud.server(name)
        if status is None:
            if server["status"] == "ERROR":
                _cmp(out, "liveness", f"server {name} status", "not ERROR", "ERROR")
            continue
        _cmp(out, "liveness", f"server {name} status", status, server["status"])
        _cmp(out, "liveness", f"server {name} task_state", None, server.get("OS-EXT-STS:task_state"))
        if migration_status:
            migration = views.latest_migration(ctx.cloud, name)
            _cmp(out, "liveness", f"migration of {name} status", migration_status,
                 migration.status if migration else None)
    return out


@check("recovery")
def recovered(ctx) -> list:
    """After a fault ended a move and Nova handled it, no move is left half-done (1836369's
    shape): a server not at VERIFY_RESIZE keeps no task state, migration
    context or migration in progress; and a server the failed move left as it
    was -- at rest, its guest running on its host alone, the host its latest
    move started from (or never moved) -- is not in ERROR: Nova knows where
    and what it is (2044235's shape)."""
    if not getattr(ctx.phase, "recovered", False):
        return []
    from harness.oracles import views
    after = ctx.phase.name.replace("after-", "after the ", 1)  # after the restart, the failure
    return [Finding("recovery", f"server {server} {what} {after}", None, seen)
            for server, what, seen in views.left_behind(ctx.cloud)]


@check("logs")
def logs_clean(ctx) -> list:
    """No accounting error was logged (the periodic logs, it does not raise)."""
    out = []
    text = ctx.log_text.splitlines()
    for pattern in LOG_PATTERNS:
        lines = [with_cause(text, i) for i, ln in enumerate(text) if pattern.search(ln)]
        if lines:
            out.append(Finding("logs", f"log lines matching {pattern.pattern!r}", [],
                               [ln[:240] for ln in lines[:3]]))
    return out


#: a traceback's last line, "nova.exception.CPUPinningInvalid: CPU set to pin ..." (a log
#: record starts with its date, a traceback's source lines are indented)
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Z]\w*(?:Error|Exception|Invalid|Unknown|"
                             r"Unsupported|NotSupported|NotFound|Failed|Timeout)): ")


def with_cause(lines: list, i: int) -> str:
    """Line ``i``, followed by the exception its traceback ends in, if one follows.

    "Error updating resources" says only that the periodic failed; the last
    line of the traceback under it (e.g. ``CPUPinningUnknown: CPU set to pin
    [5, 6] ...``) says why, and belongs in the evidence.
    """
    line = lines[i].strip()
    raised = _EXCEPTION_LINE.match(lines[i])
    if raised:  # the matching line is itself a traceback's last line: name it
        return line + f" <- {raised.group(1)}"
    if i + 1 < len(lines) and lines[i + 1].startswith("Traceback"):
        last = next((ln for ln in lines[i + 2:] if not ln.startswith(" ")), None)
        if last:
            name, _, message = last.strip().partition(": ")
            line += f" <- {name.rsplit('.', 1)[-1]}" + (f": {message}" if message else "")
    return line


_RAISED = re.compile(r"<- (\w+)")


def value_of(finding) -> str:
    """What a finding saw, as a known-findings entry names it.

    ``repr(seen)``; for a convergence finding ``repr(before) -> repr(after)``
    (the damage is the before); for a log finding (also one the convergence
    periodic logged) the exceptions its lines
    end in (``CPUPinningInvalid``), or ``no exception`` -- the log text
    itself carries addresses and times. Works on a stored report's values
    too (their repr is the text the report printed).
    """
    if finding.check == "logs" or (finding.check == "convergence"  # a periodic's log lines
                                    and finding.where.startswith("log lines matching")):
        return ", ".join(sorted(set(_RAISED.findall(repr(finding.seen))))) or "no exception"
    if finding.check == "convergence":
        return f"{finding.expected!r} -> {finding.seen!r}"
    return repr(finding.seen)


#: the checks that compare a checkpoint's views with its ledger (what a root cause's
#: effect is undone on and checked again; the rest are named as they show)
LEDGER = ("rt", "truth", "placement", "pci")


from harness.oracles import pci_checks  # noqa: E402,F401  registers "pci" (it uses the above)


def run_ledger(ctx) -> list:
    return [f for name in LEDGER for f in CHECKS[name](ctx)]


def run_all(ctx) -> list:
    out = []
    for name in CHECKS:
        out.extend(CHECKS[name](ctx))
    return out


def diff_snapshots(before: dict, after: dict, prefix: str = "") -> list:
    """Paths where two snapshots differ, as ``(path, before, after)``."""
    if isinstance(before, dict) and isinstance(after, dict):
        rows = []
        for key in sorted(set(before) | set(after), key=str):
            rows += diff_snapshots(before.get(key), after.get(key), f"{prefix}{key} ".lstrip())
        return rows
    return [] if before == after else [(prefix.strip(), before, after)]
