"""A self-contained HTML report, rendered from the JSON report alone.

What a person opens after a campaign: per campaign the point x target x
ending grid (each cell a verdict, a failing or known one linking to its
item), and per failing, known or errored item a timeline with a lane per
host role -- the calls around the point as the recorded trace has them,
the fault at the point in its target's lane, each checkpoint's findings
as expected vs seen -- and the replay command. No script, no external
file: it opens from a CI artifact store as it is. ``run --html`` writes it
beside the JSON; ``nova-chaos html REPORT.json`` renders any stored report.
"""
from __future__ import annotations

import collections
import hashlib
import html

from harness.execute.item import Item, target_roles

#: calls shown either side of the point
AROUND = 5
_MARK = {"pass": "\u00b7", "known": "k", "fail": "F", "error": "E"}
_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px;vertical-align:top}
th{background:#f2f2f2}
td.pass{background:#e8f5e9;text-align:center}
td.known{background:#fff3cd;text-align:center}
td.fail{background:#f8d7da;text-align:center;font-weight:bold}
td.error{background:#d6d8f5;text-align:center;font-weight:bold}
td.none{background:#fafafa}
td.point{font-family:monospace;white-space:nowrap}
tr.at td{background:#ffe9a8}
td.fault{font-weight:bold;color:#a00}
code{font-size:12px}
section.item{border-top:2px solid #999;margin-top:1.5em}
table.causes td{text-align:left;max-width:40em}
"""


def anchor(item_id: str) -> str:
    """The item's anchor in the report (stable: a digest of its id)."""
    return "item-" + hashlib.sha1(item_id.encode()).hexdigest()[:12]


def render(report: dict) -> str:
    """The whole page for a JSON report (``{"meta": ..., "items": [...]}``)."""
    meta, items = report.get("meta", {}), report.get("items", [])
    by_id = {r["id"]: r for r in items}
    counts = collections.Counter(r["verdict"] for r in items)
    out = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
           f"<title>nova-chaos: {_e(meta.get('scenario'))}</title><style>{_CSS}</style></head><body>",
           f"<h1>nova-chaos: {_e(meta.get('scenario'))}</h1>",
           f"<p>{_e(meta.get('nova', ''))}<br>fault {_e(meta.get('fault') or 'periodic')}, "
           f"mutation {_e(meta.get('mutation') or 'none')}, mode {_e(meta.get('mode', '?'))}"
           + (" &mdash; <b>partial report</b>" if meta.get("partial") else "") + "</p>",
           "<p id='totals'>" + ", ".join(f"{k} {counts[k]}" for k in ("pass", "known", "fail", "error"))
           + "</p>"]
    out += _uninjected(meta.get("uninjected", {}), by_id)
    out += _causes(meta.get("causes", {}), meta.get("fixed", []), by_id)
    campaigns = meta.get("campaigns", [])
    for c in campaigns:
        out += _grid(c, by_id)
    points_of = {(c["scenario"], c["window"]): c["points"] for c in campaigns}
    for r in items:
        if r["verdict"] != "pass":
            out += _item(r, points_of)
    out.append("</body></html>")
    return "\n".join(out)


def _uninjected(verdicts: dict, by_id: dict) -> list:
    """The runs with no fault that every item starts from: a failing one is the first finding."""
    if not verdicts:
        return []
    cells = []
    for item_id, verdict in verdicts.items():
        text = _e(item_id)
        if item_id in by_id:
            text = f"<a href='#{anchor(item_id)}'>{text}</a>"
        cells.append(f"<tr><td class='{_e(verdict)}'>{_e(verdict)}</td><td class='point'>{text}"
                     "</td></tr>")
    return ["<h2>Uninjected runs (no fault: the path every item starts from)</h2>",
            "<table class='uninjected'>" + "".join(cells) + "</table>"]


def _causes(causes: dict, fixed: list, by_id: dict) -> list:
    """Each root cause once: what it is, where it bit, the calls where its condition held."""
    if not causes:
        return []
    from harness.front import by_cause
    rows = []
    for name, e in causes.items():
        first = next((i for i in e["bit"] if i in by_id), None)
        example = f"<a href='#{anchor(first)}'>e.g.</a> " if first else ""
        windows = "<br>".join(f"{_e(place)}: {w['calls']} calls ({w['numbers'][0]}..{w['numbers'][-1]})"
                              for place, w in e["window"].items())
        state = (_e(by_cause.said(name, causes, tuple(fixed)))
                 if not e["bit"] or name in fixed else
                 f"{example}bit in {len(e['bit'])} items (held in {e['held']}): "
                 + _e(", ".join(f"{s} {n}" for s, n in sorted(e["scenarios"].items()))))
        rows.append(f"<tr><td class='{'fail' if not e['bit'] else 'known'}'><b>{_e(name)}</b><br>"
                    f"{_e(e['class'])}</td><td>{_e(e['title'])}<br><small>{_e(e['bug'])}<br>"
                    f"{_e(e['nova'])}</small></td><td>{state}</td><td>{windows}</td></tr>")
    return ["<h2>Root causes</h2><table class='causes'><tr><th>cause</th><th>mechanism</th>"
            "<th>where it bit</th><th>window (calls where its condition held)</th></tr>"
            + "".join(rows) + "</table>"]


def _grid(campaign: dict, by_id: dict) -> list:
    targets, endings = campaign["targets"], campaign["endings"]
    by_place = {}
    for item_id, r in by_id.items():
        item = Item.parse(item_id)
        if (item.scenario, item.window) == (campaign["scenario"], campaign["window"]):
            by_place[(item.point, item.target, item.ending)] = r
    out = [f"<h2>{_e(campaign['scenario'])}, window {_e(campaign['window'])}</h2>",
           "<table class='grid'><tr><th>#</th><th>point</th>"
           + "".join(f"<th>{_e(t)}<br>{_e(e)}</th>" for t in targets for e in endings) + "</tr>"]
    for n, point in enumerate(campaign["points"], 1):
        cells = []
        for t in targets:
            for e in endings:
                r = by_place.get((point, t, e))
                if r is None:
                    cells.append("<td class='none'></td>")
                    continue
                mark = _MARK[r["verdict"]]
                if r["verdict"] != "pass":
                    mark = f"<a href='#{anchor(r['id'])}'>{mark}</a>"
                cells.append(f"<td class='{r['verdict']}' title='{_e(r['id'])}'>{mark}</td>")
        out.append(f"<tr><td>{n}</td><td class='point'>{_e(point)}</td>{''.join(cells)}</tr>")
    out.append("</table>")
    return out


def _item(r: dict, points_of: dict) -> list:
    item = Item.parse(r["id"])
    out = [f"<section class='item' id='{anchor(r['id'])}'>",
           f"<h3>{_e(r['verdict']).upper()} <code>{_e(r['id'])}</code>"
           + (" &mdash; without any injection" if item.is_uninjected else "") + "</h3>",
           f"<p>reproduce: <code>{_e(r.get('replay', item.replay_command()))}</code></p>"]
    if r.get("memo"):  # the rest of its run was another's, in the same state (harness.execute.memo)
        out.append(f"<p class='memo'>continuation inherited: {_e(r['memo'])}</p>")
    problems = [p["text"] for p in r.get("problems", [])]
    if problems:
        out.append("<ul class='problems'>" + "".join(f"<li>{_e(p)}</li>" for p in problems)
                   + "</ul>")
    out += _timeline(item, r, points_of.get((item.scenario, item.window), []))
    out += _checkpoints(r)
    if r.get("known"):  # "klass: finding line (reason)": each reason once
        reasons = dict.fromkeys(k[k.index(" (") + 2:-1] if " (" in k else k for k in r["known"])
        out.append(f"<p>known ({len(r['known'])} findings), reviewed as:</p><ul class='known'>"
                   + "".join(f"<li>{_e(why)}</li>" for why in reasons) + "</ul>")
    if r.get("log"):
        out.append("<details><summary>Nova's last warnings</summary><pre>"
                   + _e("\n".join(r["log"])) + "</pre></details>")
    out.append("</section>")
    return out


def _timeline(item: Item, r: dict, points: list) -> list:
    """The calls around the point, a lane per host role; the fault in its target's lane."""
    if item.point not in points:
        return []
    at = points.index(item.point)
    shown = points[max(0, at - AROUND):at + AROUND + 1]
    lanes = list(dict.fromkeys(["source", "dest", *(p.split(":", 1)[0] for p in shown)]))
    fired = "; ".join(r.get("fired", [])) or "did not fire"
    struck = target_roles(item.target)
    out = ["<table class='timeline'><tr><th>#</th>"
           + "".join(f"<th>{_e(lane)}</th>" for lane in lanes) + "</tr>"]
    for n, point in enumerate(shown, max(0, at - AROUND) + 1):
        role, _, call = point.partition(":")
        here = point == item.point
        row = [f"<td>{n}</td>"]
        for lane in lanes:
            text = _e(call) if lane == role else ""
            if here and lane in struck:
                text += f"<br><span class='fault'>&#9889; {_e(item.fault)}: {_e(fired)}</span>"
            row.append(f"<td class='point'>{text}</td>")
        out.append(("<tr class='at'>" if here else "<tr>") + "".join(row) + "</tr>")
    out.append("</table>")
    return out


def _checkpoints(r: dict) -> list:
    by_cp = collections.defaultdict(list)
    for f in r.get("findings", []):
        by_cp[f["checkpoint"]].append(f)
    if not by_cp:
        return []
    out = ["<table class='findings'><tr><th>checkpoint</th><th>check</th><th>where</th>"
           "<th>expected</th><th>seen</th><th>class</th></tr>"]
    for cp, found in by_cp.items():
        for f in found:
            out.append(f"<tr><td>{_e(cp)}</td><td>{_e(f['check'])}</td><td>{_e(f['where'])}</td>"
                       f"<td><code>{_e(f['expected'])}</code></td><td><code>{_e(f['seen'])}</code>"
                       f"</td><td>{_e(f.get('class', ''))}</td></tr>")
    out.append("</table>")
    return out


def _e(text) -> str:
    return html.escape(str(text if text is not None else ""), quote=True)
