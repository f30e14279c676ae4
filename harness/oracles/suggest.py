"""Suggest a root cause's effects from one item's findings (a reviewer's aid).

Writing a cause means stating its effect against the ledger exactly. Given
an item's checkpoints (with the views they read) and the state its fault
met, this searches the effect vocabulary of :mod:`harness.oracles.causes`
-- which host's tracker lacks or counts which flavor, with which cells,
kept or healed by the periodic; which consumer's allocation placement holds
where; which host keeps a domain of the server -- for the fewest effects that, undone, leave nothing of the views'
findings: greedily, one effect at a time, or two where one alone cannot
help (a moved allocation is a lack here and a count there). What is left
(a log line, a server state) is for ``expect``. The result is a proposal
to review, never a verdict: the harness judges only reviewed causes.
"""
from __future__ import annotations

import itertools

from harness.oracles import causes


def atoms(roles) -> list:
    """Every effect the vocabulary can state on ``roles``' hosts (at any checkpoint)."""
    out = []
    for host, sign, flavor in itertools.product(roles, (1, -1), ("old", "new")):
        for consumer in ("instance", "migration"):
            out.append(causes.Effect(("*",), host, sign, flavor, None, consumer=consumer,
                                     persists=True))
        for cells, domain in itertools.product(("current", "old", "new"), ("defined", "running")):
            out.append(causes.Effect(("*",), host, sign, flavor, cells, False, None, True, domain))
        for cells, counters, persists in itertools.product(
                (None, "current", "old", "new"), (True, False), (False, True)):
            if cells is None and not counters:
                continue
            out.append(causes.Effect(("*",), host, sign, flavor, cells, counters, None, persists))
    return out


def _left(cp, server_bounds, chosen, scenario) -> list:
    subset = []
    for server, effects in _by_server(chosen).items():
        cause = causes.Cause("suggested", "hard", "", "", "", ("*",), ("*",), {"x": ("x",)},
                             tuple(effects), ())
        subset.append(causes.Bound(cause, server, server_bounds[server]))
    return causes.residual(cp, tuple(subset), scenario) if subset else list(cp.findings)


def _by_server(chosen) -> dict:
    out: dict = {}
    for server, effect in chosen:
        out.setdefault(server, []).append(effect)
    return out


def for_checkpoint(cp, hosts_by_server: dict, scenario) -> tuple:
    """``(chosen [(server, Effect)], findings left)`` for one checkpoint."""
    candidates = [(server, e) for server, hosts in sorted(hosts_by_server.items())
                  for e in atoms(sorted(hosts))]
    chosen, left = [], _left(cp, hosts_by_server, [], scenario)
    while left:
        best = None
        for size in (1, 2):
            for extra in itertools.combinations(candidates, size):
                if any(x in chosen for x in extra):
                    continue
                rest = _left(cp, hosts_by_server, chosen + list(extra), scenario)
                if len(rest) < len(left) and (best is None or len(rest) < len(best[1])):
                    best = (list(extra), rest)
            if best is not None:
                break
        if best is None:
            break
        chosen += best[0]
        left = best[1]
    return chosen, left


def suggest(checkpoints, state: dict, scenario) -> list:
    """Per checkpoint with findings: ``(name, chosen, left)``."""
    hosts_by_server = {}
    for per_server in (state or {}).values():
        for server, facts in per_server.items():
            if isinstance(facts, dict) and facts.get("hosts"):
                hosts_by_server.setdefault(server, dict(facts["hosts"]))
    out = []
    for cp in checkpoints:
        if cp.findings and cp.evidence is not None:
            chosen, left = for_checkpoint(cp, hosts_by_server, scenario)
            out.append((cp.name, chosen, left))
    return out


def toml_line(checkpoint: str, effect) -> str:
    """An effect as a line of ``root-causes.toml``."""
    verb = "lacks" if effect.sign < 0 else "counts"
    parts = [f'at = "{checkpoint}"', f'host = "{effect.host}"', f'{verb} = "{effect.flavor}"']
    if effect.consumer:
        parts.append(f'consumer = "{effect.consumer}"')
    elif effect.domain:
        parts += [f'cells = "{effect.cells}"', f'domain = "{effect.domain}"']
    else:
        if effect.cells:
            parts.append(f'cells = "{effect.cells}"')
        if not effect.counters:
            parts.append("counters = false")
        if effect.persists:
            parts.append("persists = true")
    return "{ " + ", ".join(parts) + " },"
