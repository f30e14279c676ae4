"""A run's findings by root cause: each cause once, with where it bit and where it held.

Items keep the causes whose condition held where their fault struck and
the ones that bit (:mod:`harness.oracles.causes`). A reader -- a Nova
developer, CI -- wants each mechanism once: its name, class, bug and Nova
lines, the items and scenarios it bit in, and its *window*, the calls
where its condition held, so that a change of width between two Nova
trees shows. A cause that held but bit nowhere no longer reproduces: said
once, by name. ``--fixed NAME`` turns that around for a developer proving
a fix: the named cause must bite nowhere.
"""
from __future__ import annotations

import collections

from harness.execute.item import Item
from harness.execute.record import Problem


def summarize(records: list, causes: list, campaigns: list) -> dict:
    """``{name: {...}}`` for every cause that held or bit in ``records`` (Record or JSON dicts)."""
    order = {(c["scenario"], c["window"], p): i
             for c in campaigns for i, p in enumerate(c["points"], 1)}
    by_name = {c.name: c for c in causes}
    out: dict = {}
    for r in records:
        rid, said = (r["id"], r.get("causes", {})) if isinstance(r, dict) else (
            r.item.id, r.causes)
        item = Item.parse(rid)
        for name in dict.fromkeys([*said.get("held", []), *said.get("bit", [])]):
            cause = by_name.get(name)
            entry = out.setdefault(name, {
                "class": cause.klass if cause else "?", "title": cause.title if cause else "",
                "bug": cause.bug if cause else "", "nova": cause.nova if cause else "",
                "bit": [], "held": 0, "scenarios": {}, "window": {}})
            entry["held"] += name in said.get("held", [])
            if not item.is_uninjected:  # Nova's own path has no window: it bites at the deletes
                place = f"{item.scenario}/{item.window}"
                held_at = entry["window"].setdefault(place, {})
                held_at[item.point] = order.get((item.scenario, item.window, item.point), 0)
            if name in said.get("bit", []):
                entry["bit"].append(rid)
                entry["scenarios"][item.scenario] = entry["scenarios"].get(item.scenario, 0) + 1
    for entry in out.values():
        entry["window"] = {place: _span(points) for place, points in sorted(entry["window"].items())}
    return dict(sorted(out.items()))


def _span(points: dict) -> dict:
    ranked = sorted(points.items(), key=lambda kv: kv[1])
    return {"calls": len(ranked), "first": ranked[0][0], "last": ranked[-1][0],
            "numbers": [n for _, n in ranked]}


def stale(summary: dict) -> list:
    """Causes whose condition held and that bit nowhere: they no longer reproduce."""
    return [name for name, e in summary.items() if e["held"] and not e["bit"]]


def lines(summary: dict, fixed: tuple = ()) -> list:
    """The terminal's section: each cause once."""
    if not summary:
        return []
    bit = [n for n, e in summary.items() if e["bit"]]
    out = [f"\nroot causes: {len(bit)} bit in this run"
           + (f", {len(summary) - len(bit)} held without biting" if len(bit) < len(summary) else "")]
    for name, e in summary.items():
        if not e["bit"]:
            continue
        where = ", ".join(f"{s} {n}" for s, n in sorted(e["scenarios"].items()))
        out.append(f"  {name} ({e['class']}): bit in {len(e['bit'])} items "
                   f"(held in {e['held']}): {where}")
        out.append(f"      {e['title']}")
        if not e["window"]:
            out.append("      no injection: Nova's own path, at the deletes right after the ending")
        for place, span in e["window"].items():
            out.append(f"      window {place}: {span['calls']} calls, {span['numbers'][0]}. "
                       f"{span['first']} .. {span['numbers'][-1]}. {span['last']}")
        if e["bug"]:
            out.append(f"      bug: {e['bug']}")
    for name in dict.fromkeys([*stale(summary), *fixed]):
        out.append(f"  {said(name, summary, fixed)}")
    return out


def said(name: str, summary: dict, fixed: tuple) -> str:
    """One line on a cause that stopped reproducing, or one said fixed."""
    e = summary.get(name)
    if e is None:
        return (f"root cause {name} (--fixed): its condition held in no item of this run: "
                "the fix is not shown")
    if e["bit"]:
        return f"root cause {name}: said fixed (--fixed), still bites in {len(e['bit'])} items"
    return (f"root cause {name}: {'fixed, as --fixed says' if name in fixed else 'no longer reproduces'}"
            f" in {e['held']} items where its condition held")


def verdict_problems(summary: dict, fixed: tuple) -> list:
    """The run-level failures: a cause that stopped reproducing (unless said fixed), a
    fixed one that still bites, a fixed one this run never tested."""
    out = [n for n in stale(summary) if n not in fixed]
    out += [n for n in fixed if n not in summary or summary[n]["bit"]]
    return out


def apply_fixed(records: list, fixed: tuple) -> list:
    """Items where a cause said fixed still bit fail: they are the evidence it is not."""
    out = []
    for r in records:
        still = [n for n in fixed if n in r.causes.get("bit", [])]
        if still and r.verdict == "known":
            r.problems = r.problems + [Problem(
                "finding", f"root cause {n}, said fixed (--fixed), still bites here") for n in still]
            r.verdict = "fail"
        out.append(r)
    return out


# -- one item per cause and scenario: what `nova-chaos known` runs ------------

SAMPLES_FILE = "cause-samples.toml"


def clearest(records: list, name: str) -> dict:
    """Per scenario, the item that shows cause ``name`` most plainly: a hard finding if
    any, the fewest servers, it alone bit there, one target struck, the card's window, the fewest findings;
    the scenarios in that order too (the first is the cause's clearest anywhere)."""
    best: dict = {}
    for r in records:
        said = r.get("causes", {})
        if r["verdict"] != "known" or name not in said.get("bit", []):
            continue
        item = Item.parse(r["id"])
        if item.mutation:  # clean Nova's, not a broken one's
            continue
        rank = (not any(f.get("class") == "hard" for f in r.get("findings", [])),
                len(next(iter(r.get("state", {}).values()), {})), len(said["bit"]), item.target == "both", item.window != "resize",
                len(r.get("findings", [])), r["id"])
        if item.scenario not in best or rank < best[item.scenario][0]:
            best[item.scenario] = (rank, r["id"])
    return {scen: rid for scen, (_, rid) in sorted(best.items(), key=lambda kv: kv[1])}


#: the sampled items per cause: its clearest in this many scenarios (the full campaign
#: checks every other; CI runs these)
PER_CAUSE = 3


def samples_text(records: list, causes: list, sources: list, kept: dict | None = None) -> str:
    """The samples file: for each cause, its clearest items (in up to :data:`PER_CAUSE`
    scenarios, clearest first; TOML). A cause the records never show keeps ``kept``'s."""
    lines = [f"# Up to {PER_CAUSE} items per root cause, its clearest where it bit, one per "
             "scenario (written",
             "# by `nova-chaos causes --samples REPORT.json...` from: " + ", ".join(sources)
             + "; a cause those do not show keeps the samples it had).",
             "# `nova-chaos known` runs them: each must come out known, its cause biting.",
             "[samples]"]
    for cause in causes:
        ids = list(clearest(records, cause.name).values())[:PER_CAUSE] or (kept or {}).get(
            cause.name, [])[:PER_CAUSE]
        if ids:
            lines.append(f"{cause.name} = [\n" + "".join(f"    {_quoted(i)},\n" for i in ids) + "]")
    return "\n".join(lines) + "\n"


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def load_samples(path: str) -> dict:
    """``{cause name: [item ids]}`` from a samples file ({} if there is none)."""
    import os

    from harness import files
    from harness.errors import InvalidScenario
    if not os.path.exists(path):
        return {}
    raw = files.read_toml(path).get("samples", {})
    if not all(isinstance(v, list) for v in raw.values()):
        raise InvalidScenario(f"{path}: [samples] maps cause names to lists of item ids")
    return raw
