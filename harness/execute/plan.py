"""Which items a run sweeps: one call for every front end (CLI, pytest plugin).

A campaign is (scenario, window, targets, endings); planning discovers each
window's points, keeps the chosen ones, and gives a lifecycle item whose
call the card's window also has the card's id (it is swept once).

Discovery runs every wanted ending uninjected first; an ending whose
uninjected run does not pass is a finding by itself (``Plan.failing``,
reported first). Its items are swept if a reviewed root cause explains it
(``known``), not if it fails: each would only repeat a new finding.
"""
from __future__ import annotations

import dataclasses

from harness.execute import campaign, discovery
from harness import faults


@dataclasses.dataclass
class Plan:
    items: list     # item.Item, in sweep order, no duplicates
    traces: dict    # trace key -> {ending: [point ids]} (discovery), every window used
    tables: list    # (scenario name, window, points swept in order, targets, endings)
    lines: list     # one line per campaign: its points and items
    uninjected: list = dataclasses.field(default_factory=list)  # Record per scenario x ending

    @property
    def failing(self) -> list:
        """The uninjected runs that failed: new findings without any injection, each an
        item of the report. One a reviewed root cause of Nova's own path explains
        (``known``) is said in the uninjected runs' line and the report's meta."""
        return [r for r in self.uninjected if r.verdict not in ("pass", "known")]


def _outcomes(scen, endings, mutation) -> dict:
    from harness.cloud import nova_support
    return discovery.outcomes(scen, nova_support.current_backend(), endings, mutation)


def plan(campaigns, points=(), mutation=None, discover=discovery.discover,
         fault=faults.DEFAULT, outcomes=_outcomes) -> Plan:
    """Plan ``campaigns`` (``(scenario, window, targets, endings)``), in order.

    ``points``: only these point ids (each must exist in the one campaign
    given); ``discover(scenario, window, endings, mutation)`` gives the
    traces and ``outcomes(scenario, endings, mutation)`` the uninjected
    runs' records (the CLI discovers, the pytest plugin reads without
    importing Nova); only the wanted endings are discovered.
    """
    items, traces_by, tables, lines, uninjected = [], {}, {}, [], {}
    planned = [(scen, window, targets, endings, discover(scen, window, endings, mutation))
               for scen, window, targets, endings in campaigns]
    rank = {scen.name: i for i, (scen, *_) in enumerate(campaigns)}
    planned.sort(key=lambda p: (rank[p[0].name], len(campaign.union(p[4]))))
    for scen, window, targets, endings, traces in planned:
        campaign.validate(scen, traces, targets, endings, list(points), mutation, window, fault)
        runs = outcomes(scen, endings, mutation)
        for ending in endings:
            uninjected.setdefault(runs[ending].item.id, runs[ending])
        # an ending whose uninjected run shows a reviewed cause is swept: its items'
        # deletes follow a periodic; a new finding there would show in every item
        failing = [e for e in endings if runs[e].verdict not in ("pass", "known")]
        swept = [e for e in endings if e not in failing]
        union = campaign.union({e: traces[e] for e in endings})
        chosen = [p for p in union if p in points] if points else union
        mine = (campaign.items(scen, traces, targets, swept, mutation, chosen, window, fault)
                if swept else [])
        traces_by[campaign.trace_key(scen.name, window)] = traces
        if window != campaign.DEFAULT_WINDOW:  # its calls in the card's window keep their ids
            card = discover(scen, campaign.DEFAULT_WINDOW, endings, mutation)
            traces_by[campaign.trace_key(scen.name, campaign.DEFAULT_WINDOW)] = card
            mine = campaign.as_narrower(mine, traces, campaign.DEFAULT_WINDOW, card)
        have = set(items)
        items += [i for i in mine if i not in have]
        for i in mine:
            tables.setdefault((scen.name, i.window), (targets, swept, set()))[2].add(i.point)
        shared = sum(i.window != window for i in mine)
        lines.append(f"{scen.name}, window {window!r}: {len(union)} yield points, "
                     f"{len(mine) - shared} items"
                     + (f" ({shared} more are calls of the card's window, swept under its ids)"
                        if shared else "")
                     + (f"; not swept: {', '.join(failing)} (the uninjected run fails)"
                        if failing else ""))
    tables = [(name, window, [p for p in campaign.union(traces_by[campaign.trace_key(name, window)])
                              if p in swept], targets, endings)
              for (name, window), (targets, endings, swept) in tables.items()]
    return Plan(items, traces_by, tables, lines, list(uninjected.values()))
