"""``nova-chaos run``: plan a campaign, sweep it, report (table, JSON, JUnit), resume."""
from __future__ import annotations

import json
import os
import sys
import time

from harness.errors import UsageError
from harness import faults
from harness.front import console
from harness.front.console import EXIT_FINDINGS, EXIT_OK


def _campaigns(args) -> list:
    """(scenario, window, targets, endings) to sweep; checked before Nova loads.

    ``all`` is every scenario in scenarios/; there, --target/--ending keep
    only what each scenario has (a same-host scenario has one target).
    """
    from harness import scenario
    from harness.execute import campaign
    names = list(scenario.available()) if args.scenario == "all" else [args.scenario]
    windows = args.window or [campaign.DEFAULT_WINDOW]
    out = []
    for name in names:
        scen = scenario.load(name)
        if args.scenario == "all":
            targets, endings = campaign.choose(scen, args.target, args.ending)
        else:  # one scenario: a target or ending it lacks is an error, not dropped
            targets, endings = campaign.choose(scen)
            targets, endings = args.target or targets, args.ending or endings
        for window in dict.fromkeys(windows):
            campaign.validate(scen, {}, targets, endings, [], args.mutate, window)
            out.append((scen, window, targets, endings))
    return out


def cmd_run(args) -> int:
    from harness.execute import executor, plan
    from harness.front import report
    jobs = console.jobs(args)
    timeout = executor.ITEM_TIMEOUT if args.timeout is None else args.timeout
    if not timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if args.durations and not args.shard:
        raise UsageError("--durations balances shards: it needs --shard K/N")
    if args.resume and not args.json:
        raise UsageError("--resume needs --json FILE (the report to resume)")
    todo = _campaigns(args)
    from harness.oracles import causes, known
    known.load()  # a malformed known-findings file is one line now, not an error per item
    causes.named(args.fixed, "root cause (--fixed)")
    if args.point and len(todo) > 1:
        raise UsageError("--point needs one scenario and one window")
    info = console.load(args)
    from harness.cloud import nova_support
    faults.parse(args.fault).check_backend(nova_support.current_backend())
    started = time.monotonic()
    planned = plan.plan(todo, args.point or (), args.mutate, fault=args.fault)
    for line in planned.lines:
        print(line, file=sys.stderr)
    items, traces_by, tables = planned.items, planned.traces, planned.tables
    # a failing uninjected run is a finding of its own, reported first (by shard 1 of N)
    first = planned.failing
    shard = None
    if args.shard:
        from harness.execute import shards
        k, n = shards.parse(args.shard)
        weights = shards.durations(args.durations) if args.durations else None
        cut = shards.assign(items, n, weights)
        shard = {"index": k, "of": n, "planned": len(items) + len(first),
                 "digest": shards.digest(items), "partition": shards.partition_digest(cut)}
        items = [i for i in items if cut[i.id] == k]
        first = first if k == 1 else []
        print(f"shard {k}/{n}: {len(items) + len(first)} of {shard['planned']} items",
              file=sys.stderr)
    for line in report.uninjected_lines(planned.uninjected):
        print(line, file=sys.stderr)
    if args.list:
        print("\n".join(i.id for i in items), file=console.OUT)
        print(f"{len(items)} items" + (f"; and {len(first)} uninjected run(s) with findings, "
                                       "reported as items when run" if first else ""),
              file=sys.stderr)
        return EXIT_OK
    for r in planned.uninjected:  # a defect of Nova's own path, reviewed: said first too
        if r.verdict == "known":
            print(f"without any injection, known: {r.item.id}: {r.known[0]} "
                  f"({len(r.known)} findings; {r.item.replay_command()})", file=sys.stderr)
    for r in first:  # the first finding: said now, not only after a long sweep (in full there)
        what = (f"{r.problems[0]} ... ({len(r.problems)} problems; " if r.problems else
                f"{r.known[0]} ({len(r.known)} findings of reviewed root causes; ")
        print(f"FIRST FINDING, without any injection: {r.item.id} is {r.verdict}: "
              f"{what}{r.item.replay_command()})", file=sys.stderr)
    mode = args.mode or executor.default_mode()
    print(f"{len(items)} items; mode {mode}, {jobs} at a time", file=sys.stderr)
    meta = {"scenario": args.scenario, "windows": [t[1] for t in tables], "nova": info.banner(),
            "backend": args.backend, "mutation": args.mutate, "fault": args.fault,
            "jobs": jobs, "mode": mode, "shard": shard,
            # every uninjected run the sweep starts from, and its verdict (failing ones are items)
            "uninjected": {r.item.id: r.verdict for r in planned.uninjected},
            "campaigns": [{"scenario": n, "window": w, "points": c, "targets": t, "endings": e}
                          for n, w, c, t, e in tables]}
    kept = _resumed(args, items, meta) if args.resume else {}
    todo_items = [i for i in items if i.id not in kept]
    progress = report.Progress(len(todo_items))
    partial = report.PartialReport(args.json, meta, len(items) + len(first)) if args.json else None
    for record in [*first, *kept.values()]:
        partial.results[record.item.id] = record

    def on_result(result):
        progress.update(result)
        if partial is not None:
            partial.add(result)
    try:
        parents: list = []
        fresh = {r.item.id: r for r in executor.run_items(
            todo_items, traces_by, jobs, args.backend, on_result, mode, timeout, parents,
            args.memo)}
        results = first + [kept.get(i.id) or fresh[i.id] for i in items
                           if i.id in kept or i.id in fresh]
    except KeyboardInterrupt:
        if partial is not None and partial.results:
            partial.write()
            print(f"\nnova-chaos: partial JSON report ({len(partial.results)} of {len(items)} "
                  f"items): {os.path.abspath(args.json)}", file=sys.stderr)
        raise
    elapsed = time.monotonic() - started
    for name, window, chosen, targets, endings in tables:
        mine = [r for r in results if r.item.scenario == name and r.item.window == window
                and not r.item.is_uninjected]
        print(f"\n{name}, window {window!r}:", file=console.OUT)
        print(report.table(mine, chosen, targets, endings), file=console.OUT)
    from harness.front import by_cause
    fixed = tuple(args.fixed)
    results = by_cause.apply_fixed(results, fixed)
    failed = [r for r in results if r.verdict in ("fail", "error")]
    for r in failed:
        print(report.failure_text(r), file=console.OUT)
    meta["seconds"] = round(elapsed, 1)
    meta["causes"] = by_cause.summarize(results, causes.load(), meta["campaigns"])
    meta["fixed"] = list(fixed)
    for line in by_cause.lines(meta["causes"], fixed):
        print(line, file=console.OUT)
    # a shard sees part of each cause's items: `merge` judges the causes of the whole run
    regressed = [] if shard else by_cause.verdict_problems(meta["causes"], fixed)
    unsound = []
    if executor.strategy(mode).has_parents:
        meta["fork_parents"] = parents
        # every child continued its parent's run: a parent off its recorded
        # trace, or failing uninjected, undermines the sweep it forked
        unsound = [p for p in parents if not (p["passed"] and p["trace_matches"])]
        for p in unsound:
            what = "left its recorded trace" if p["passed"] else f"failed ({p['why']})"
            print(f"nova-chaos: the uninjected fork parent of {p['scenario']} (window "
                  f"{p['window']!r}) {what}: "
                  "its sweep proves nothing; run it again with --mode fresh", file=console.OUT)
    text = report.to_json(results, meta) if args.json or args.html else None
    if args.json:
        report.atomic_write(args.json, text)
        print(f"JSON report: {os.path.abspath(args.json)}", file=console.OUT)
    if args.html:
        from harness.front import html
        report.atomic_write(args.html, html.render(json.loads(text)))
        print(f"HTML report: {os.path.abspath(args.html)}", file=console.OUT)
    if args.junit:
        report.atomic_write(args.junit, report.to_junit(results, f"nova-chaos.{args.scenario}",
                                                        html=args.html, causes=meta["causes"],
                                                        fixed=fixed))
        print(f"JUnit report: {os.path.abspath(args.junit)}", file=console.OUT)
    print(f"{len(results)} items in {elapsed:.1f}s ({elapsed / max(len(results), 1):.2f}s/item "
          f"wall); {len(failed)} failed", file=console.OUT)
    return (EXIT_FINDINGS if failed or unsound or regressed
            or len(results) != len(items) + len(first) else EXIT_OK)


def _resumed(args, items, meta) -> dict:
    """Judged results of ``items`` already in the ``--json`` report, re-judged against today's file.

    A report is only resumed by the run that made it: same Nova, backend,
    mutation and campaigns. Errors are run again (nothing was judged).
    """
    import json

    from harness.execute import campaign
    from harness.execute.record import Record
    from harness.oracles import known
    if not os.path.exists(args.json):
        return {}
    try:
        with open(args.json) as fh:
            data = json.load(fh)
        stored, records = data["meta"], data["items"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{args.json}: not a nova-chaos JSON report to resume ({exc!r})") from None
    for key in ("nova", "backend", "mutation", "fault", "campaigns", "shard"):
        if stored.get(key, faults.DEFAULT if key == "fault" else None) != json.loads(json.dumps(meta[key])):
            raise UsageError(f"{args.json} was made by another run ({key}: {stored.get(key)!r}, "
                             f"this run: {meta[key]!r}); not resuming it")
    planned = {i.id for i in items}
    if campaign.predates_causes(records):
        raise UsageError(f"{args.json} was judged before root causes (issue 30): not resuming "
                         "it; run without --resume")
    entries = known.load()
    kept = {r["id"]: Record.from_json(campaign.rejudge(r, entries)) for r in records
            if r["id"] in planned and r["verdict"] != "error"}
    print(f"resuming {args.json}: {len(kept)} of {len(items)} items judged already", file=sys.stderr)
    return kept
