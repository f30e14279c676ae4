"""Which items a run sweeps: one call for every front end (CLI, pytest plugin).

A campaign is (scenario, window, targets, endings); planning discovers each
window's points, keeps the chosen ones, and gives a lifecycle item whose
call the card's window also has the card's id (it is swept once).
"""
from __future__ import annotations

import dataclasses

from harness.execute import campaign, discovery
from harness.explore.faults import DEFAULT_FAULT


@dataclasses.dataclass
class Plan:
    items: list     # item.Item, in sweep order, no duplicates
    traces: dict    # trace key -> {ending: [point ids]} (discovery), every window used
    tables: list    # (scenario name, window, points swept in order, targets, endings)
    lines: list     # one line per campaign: its points and items


def plan(campaigns, points=(), mutation=None, discover=discovery.discover,
         fault=DEFAULT_FAULT) -> Plan:
    """Plan ``campaigns`` (``(scenario, window, targets, endings)``), in order.

    ``points``: only these point ids (each must exist in the one campaign
    given); ``discover(scenario, window, endings)`` gives the traces (the
    CLI discovers, the pytest plugin reads without importing Nova); only the
    wanted endings of a window reaching into them are discovered.
    """
    items, traces_by, tables, lines = [], {}, {}, []
    planned = [(scen, window, targets, endings, discover(scen, window, endings))
               for scen, window, targets, endings in campaigns]
    rank = {scen.name: i for i, (scen, *_) in enumerate(campaigns)}
    planned.sort(key=lambda p: (rank[p[0].name], len(campaign.union(p[4]))))
    for scen, window, targets, endings, traces in planned:
        campaign.validate(scen, traces, targets, endings, list(points), mutation, window, fault)
        union = campaign.union({e: traces[e] for e in endings})
        chosen = [p for p in union if p in points] if points else union
        mine = campaign.items(scen, traces, targets, endings, mutation, chosen, window, fault)
        traces_by[campaign.trace_key(scen.name, window)] = traces
        if window != campaign.DEFAULT_WINDOW:  # its calls in the card's window keep their ids
            card = discover(scen, campaign.DEFAULT_WINDOW, endings)
            traces_by[campaign.trace_key(scen.name, campaign.DEFAULT_WINDOW)] = card
            mine = campaign.as_narrower(mine, traces, campaign.DEFAULT_WINDOW, card)
        have = set(items)
        items += [i for i in mine if i not in have]
        for i in mine:
            tables.setdefault((scen.name, i.window), (targets, endings, set()))[2].add(i.point)
        shared = sum(i.window != window for i in mine)
        lines.append(f"{scen.name}, window {window!r}: {len(union)} yield points, "
                     f"{len(mine) - shared} items"
                     + (f" ({shared} more are calls of the card's window, swept under its ids)"
                        if shared else ""))
    tables = [(name, window, [p for p in campaign.union(traces_by[campaign.trace_key(name, window)])
                              if p in swept], targets, endings)
              for (name, window), (targets, endings, swept) in tables.items()]
    return Plan(items, traces_by, tables, lines)
