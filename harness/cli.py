"""``nova-chaos``: list scenarios and points, run a campaign, replay one item.

Exit codes: 0 all items pass, 1 findings, 2 usage or environment error.
Nova is imported only after the backend is chosen, and only by verbs that
need it.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

from harness.errors import UsageError

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, like every other usage error
        raise UsageError(f"{self.prog}: {message}")


def quiet():
    """Nova's import-time chatter and teardown INFO logs (to stdout!) are noise here.

    Each run's captured log (Nova's StandardLogging fixture) is unaffected.
    """
    import logging
    warnings.filterwarnings("ignore")
    root = logging.getLogger()
    root.handlers = [logging.NullHandler()]
    root.setLevel(logging.WARNING)
    sys.excepthook = sys.__excepthook__  # oslo.log routes uncaught errors into logging


#: where results go; Nova's own chatter is sent to stderr (see _load)
OUT = sys.stdout


def claim_stdout():
    """Keep fd 1 for our results and send everything else written there to stderr.

    Some of Nova's stack logs INFO lines straight to the process's stdout
    (outside the captured test log); the table, JSON lines and replay output
    must stay clean.
    """
    global OUT
    sys.stdout.flush()
    OUT = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    return OUT


def _load(args):
    """Choose the backend (``--backend``, else Nova's own default for nova-compute), load Nova.

    Nova's import-time chatter (eventlet's deprecation notice, start-up INFO
    lines) is held back: shown only if loading fails.
    """
    import dataclasses
    import tempfile

    from harness import nova_support
    claim_stdout()
    if args.backend:
        why = "--backend"
    else:
        args.backend, why = nova_support.default_backend()
    nova_support.select_backend(args.backend)
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryFile("w+") as held:  # fd 1 is stderr too here (claim_stdout)
        sys.stderr.flush()
        sys.stdout.flush()
        saved = {fd: os.dup(fd) for fd in (1, 2)}
        for fd in saved:
            os.dup2(held.fileno(), fd)
        try:
            info = nova_support.load_nova()
        finally:
            sys.stderr.flush()
            sys.stdout.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
    quiet()
    info = dataclasses.replace(info, why=why)
    print(info.banner(), file=sys.stderr)
    return info


def cmd_scenarios(args) -> int:
    from harness import scenario
    for name in scenario.available():
        s = scenario.load(name)
        hosts = ", ".join(f"{h.name} ({len(h.cells)} cells, {len(h.cpus)} CPUs)" for h in s.hosts)
        print(f"{name:24} {s.description}\n{'':24} hosts: {hosts}; endings: {', '.join(s.endings)}")
    return EXIT_OK


def cmd_points(args) -> int:
    from harness import campaign, scenario
    scen = scenario.load(args.scenario)
    _load(args)
    campaign.validate(scen, {}, [], args.ending or [], [], None, args.window)
    traces = campaign.discover(scen, args.window, use_cache=not args.fresh, here=True)
    endings = args.ending or list(scen.endings)
    points = campaign.union({e: traces[e] for e in endings})
    for i, p in enumerate(points, 1):
        only = [e for e in endings if p not in traces[e]]
        suffix = f"  (not in: {', '.join(only)})" if only else ""
        print(f"{i:3}. {p}{suffix}", file=OUT)
    print(f"{len(points)} yield points in window {args.window!r} of {scen.name}", file=sys.stderr)
    return EXIT_OK


def _campaigns(args) -> list:
    """(scenario, window, targets, endings) to sweep; checked before Nova loads.

    ``all`` is every scenario in scenarios/; there, --target/--ending keep
    only what each scenario has (a same-host scenario has one target).
    """
    from harness import campaign, scenario
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


def _jobs(args) -> int:
    from harness import executor
    try:
        return executor.jobs_value(args.jobs)
    except ValueError:
        raise UsageError(f"--jobs must be a positive integer or 'auto', got {args.jobs!r}") from None


def cmd_run(args) -> int:
    from harness import campaign, executor, report
    jobs = _jobs(args)
    timeout = executor.ITEM_TIMEOUT if args.timeout is None else args.timeout
    if not timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if args.resume and not args.json:
        raise UsageError("--resume needs --json FILE (the report to resume)")
    todo = _campaigns(args)
    from harness import known
    known.load()  # a malformed known-findings file is one line now, not an error per item
    if args.point and len(todo) > 1:
        raise UsageError("--point needs one scenario and one window")
    info = _load(args)
    started = time.monotonic()
    items, traces_by, tables = [], {}, {}
    planned = [(scen, window, targets, endings, campaign.discover(scen, window))
               for scen, window, targets, endings in todo]
    rank = {scen.name: i for i, (scen, *_) in enumerate(todo)}
    planned.sort(key=lambda p: (rank[p[0].name], len(campaign.union(p[4]))))
    for scen, window, targets, endings, traces in planned:
        campaign.validate(scen, traces, targets, endings, args.point or [], args.mutate, window)
        points = campaign.union({e: traces[e] for e in endings})
        chosen = [p for p in points if p in args.point] if args.point else points
        mine = campaign.items(scen, traces, targets, endings, args.mutate, chosen, window)
        traces_by[campaign.trace_key(scen.name, window)] = traces
        if window != campaign.DEFAULT_WINDOW:  # its calls in the card's window keep their ids
            card = campaign.discover(scen, campaign.DEFAULT_WINDOW)
            traces_by[campaign.trace_key(scen.name, campaign.DEFAULT_WINDOW)] = card
            mine = campaign.as_narrower(mine, traces, campaign.DEFAULT_WINDOW, card)
        have = set(items)
        items += [i for i in mine if i not in have]
        for i in mine:
            tables.setdefault((scen.name, i.window), (targets, endings, set()))[2].add(i.point)
        shared = sum(i.window != window for i in mine)
        print(f"{scen.name}, window {window!r}: {len(points)} yield points, "
              f"{len(mine) - shared} items"
              + (f" ({shared} more are calls of the card's window, swept under its ids)"
                 if shared else ""), file=sys.stderr)
    tables = [(name, window, [p for p in campaign.union(traces_by[campaign.trace_key(name, window)])
                              if p in swept], targets, endings)
              for (name, window), (targets, endings, swept) in tables.items()]
    if args.list:
        print("\n".join(i.id for i in items), file=OUT)
        print(f"{len(items)} items", file=sys.stderr)
        return EXIT_OK
    mode = args.mode or executor.default_mode()
    print(f"{len(items)} items; mode {mode}, {jobs} at a time", file=sys.stderr)
    meta = {"scenario": args.scenario, "windows": [t[1] for t in tables], "nova": info.banner(),
            "backend": args.backend, "mutation": args.mutate, "jobs": jobs, "mode": mode,
            "campaigns": [{"scenario": n, "window": w, "points": c, "targets": t, "endings": e}
                          for n, w, c, t, e in tables]}
    kept = _resumed(args, items, meta) if args.resume else {}
    todo_items = [i for i in items if i.id not in kept]
    progress = report.Progress(len(todo_items))
    partial = report.PartialReport(args.json, meta, len(items)) if args.json else None
    for record in kept.values():
        partial.results[record.item.id] = record

    def on_result(result):
        progress.update(result)
        if partial is not None:
            partial.add(result)
    try:
        fresh = {r.item.id: r for r in executor.run_items(
            todo_items, traces_by, jobs, args.backend, on_result, mode, timeout)}
        results = [kept.get(i.id) or fresh[i.id] for i in items if i.id in kept or i.id in fresh]
    except KeyboardInterrupt:
        if partial is not None and partial.results:
            partial.write()
            print(f"\nnova-chaos: partial JSON report ({len(partial.results)} of {len(items)} "
                  f"items): {os.path.abspath(args.json)}", file=sys.stderr)
        raise
    elapsed = time.monotonic() - started
    for name, window, chosen, targets, endings in tables:
        mine = [r for r in results if r.item.scenario == name and r.item.window == window]
        print(f"\n{name}, window {window!r}:", file=OUT)
        print(report.table(mine, chosen, targets, endings), file=OUT)
    failed = [r for r in results if r.verdict in ("fail", "error")]
    for r in failed:
        print(report.failure_text(r, _pytest_id(r.item)), file=OUT)
    meta["seconds"] = round(elapsed, 1)
    unsound = []
    if mode == "fork":
        from harness import forking
        meta["fork_parents"] = forking.PARENTS
        # every child continued its parent's run: a parent off its recorded
        # trace, or failing uninjected, undermines the sweep it forked
        unsound = [p for p in forking.PARENTS if not (p["passed"] and p["trace_matches"])]
        for p in unsound:
            print(f"nova-chaos: the uninjected fork parent of {p['scenario']} (window "
                  f"{p['window']!r}) {'left its recorded trace' if p['passed'] else 'failed'}: "
                  "its sweep proves nothing; run it again with --mode fresh", file=OUT)
    if args.json:
        report.atomic_write(args.json, report.to_json(results, meta))
        print(f"JSON report: {os.path.abspath(args.json)}", file=OUT)
    if args.junit:
        report.atomic_write(args.junit, report.to_junit(results, f"nova-chaos.{args.scenario}"))
        print(f"JUnit report: {os.path.abspath(args.junit)}", file=OUT)
    print(f"{len(results)} items in {elapsed:.1f}s ({elapsed / max(len(results), 1):.2f}s/item "
          f"wall); {len(failed)} failed", file=OUT)
    return EXIT_FINDINGS if failed or unsound or len(results) != len(items) else EXIT_OK


def _resumed(args, items, meta) -> dict:
    """Judged results of ``items`` already in the ``--json`` report, re-judged against today's file.

    A report is only resumed by the run that made it: same Nova, backend,
    mutation and campaigns. Errors are run again (nothing was judged).
    """
    import json

    from harness import campaign, executor, known
    if not os.path.exists(args.json):
        return {}
    try:
        with open(args.json) as fh:
            data = json.load(fh)
        stored, records = data["meta"], data["items"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{args.json}: not a nova-chaos JSON report to resume ({exc!r})") from None
    for key in ("nova", "backend", "mutation", "campaigns"):
        if stored.get(key) != json.loads(json.dumps(meta[key])):
            raise UsageError(f"{args.json} was made by another run ({key}: {stored.get(key)!r}, "
                             f"this run: {meta[key]!r}); not resuming it")
    planned = {i.id for i in items}
    entries = known.load()
    kept = {r["id"]: executor.Record.from_json(campaign.rejudge(r, entries)) for r in records
            if r["id"] in planned and r["verdict"] != "error"}
    print(f"resuming {args.json}: {len(kept)} of {len(items)} items judged already", file=sys.stderr)
    return kept


def _pytest_id(item) -> str:
    from harness.pytest_plugin import node_id
    return node_id(item)


def cmd_replay(args) -> int:
    from harness import campaign, known, scenario
    item = campaign.Item.parse(args.id)
    scen = scenario.load(item.scenario)
    known.load()
    campaign.validate(scen, {}, [item.target], [item.ending], [], item.mutation, item.window)
    _load(args)
    traces = campaign.discover(scen, item.window)
    campaign.validate(scen, {item.ending: traces[item.ending]}, [item.target], [item.ending],
                      [item.point], item.mutation, item.window)
    result = campaign.run_item(item, traces, detail=True)
    at = result.trace.index(item.point) if item.point in result.trace else -1
    print(f"item {item.id}", file=OUT)
    print("calls around the point:", file=OUT)
    for i in range(max(0, at - 4), min(len(result.trace), at + 5)):
        print(f"  {'>>' if i == at else '  '} {i + 1:3}. {result.trace[i]}", file=OUT)
    print(f"periodic injected on: {', '.join(result.fired) or 'nowhere (point not reached)'}", file=OUT)
    for host, rows in result.changes.items():
        print(f"what the periodic changed on {host}'s watch:", file=OUT)
        for path, before, after in rows or [("(nothing)", "", "")]:
            print(f"    {path}: {before!r} -> {after!r}", file=OUT)
    for cp in result.checkpoints:
        print(f"checkpoint {cp.name}: {'ok' if cp.passed else ''}", file=OUT)
        for f in cp.findings:
            print(f"    {known.classify(f):9} {f.line()}", file=OUT)
    for line in result.known:
        print(f"known: {line}", file=OUT)
    print(f"verdict: {result.verdict} ({result.seconds:.1f}s)", file=OUT)
    for p in result.problems:
        print(f"  {p}", file=OUT)
    return EXIT_OK if result.verdict in ("pass", "known") else EXIT_FINDINGS


def cmd_rejudge(args) -> int:
    """Judge a stored report again against today's known-findings file; nothing is rerun."""
    import collections
    import json

    from harness import campaign, known, report
    if args.known and not os.path.isfile(args.known):
        raise UsageError(f"known-findings file {args.known} does not exist")
    entries = known.load(args.known) if args.known else known.load()
    try:
        with open(args.report) as fh:
            data = json.load(fh)
        records, meta = data["items"], dict(data.get("meta", {}))
        after = [campaign.rejudge(r, entries) for r in records]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UsageError) as exc:
        raise UsageError(f"{args.report}: not a nova-chaos JSON report ({exc!r})") from None
    if args.propose:
        sets = known.point_sets(args.known) if args.known else known.point_sets()
        print(report.proposed_entries(after, sets), file=OUT)
        return EXIT_OK
    before = collections.Counter(r["verdict"] for r in records)
    now = collections.Counter(r["verdict"] for r in after)
    grouped = report.failure_groups(after, meta.get("campaigns", []))
    if grouped:
        print(grouped, file=OUT)
    verdicts = ("pass", "known", "fail", "error")
    print(f"{len(after)} items of {args.report}: "
          + ", ".join(f"{v} {before[v]} -> {now[v]}" for v in verdicts), file=OUT)
    if args.json:
        meta["rejudged"] = os.path.abspath(args.known or known.KNOWN_FILE)
        report.atomic_write(args.json, json.dumps({"meta": meta, "items": after}, indent=2))
    return EXIT_FINDINGS if now["fail"] or now["error"] else EXIT_OK


def cmd_known(args) -> int:
    """Every known-findings entry still reproduces, on one sampled item each.

    The sample is the first item, in campaign order (scenarios by name, the
    card's window first), that the entry applies to: cheap enough for CI, so
    a Nova that stopped doing what an entry says fails there, not only in
    the full campaign. A sampled item must come out ``known``.
    """
    from harness import campaign, executor, known, scenario
    if args.known and not os.path.isfile(args.known):
        raise UsageError(f"known-findings file {args.known} does not exist")
    if args.known:  # the sampled items are judged by it, in every process they run in
        os.environ[known.KNOWN_ENV] = os.path.abspath(args.known)
    entries = known.load()
    jobs = _jobs(args)
    _load(args)
    started = time.monotonic()
    samples, traces_by = {}, {}
    for name in scenario.available():
        wanted = [k for k, e in enumerate(entries) if e.covers_scenario(name) and samples.get(k) is None]
        if not wanted:
            continue
        for items, key, traces in campaign.items_per_window(scenario.load(name)):
            traces_by[key] = traces  # a window is discovered only if an entry is still unsampled
            for k in wanted:
                samples[k] = samples.get(k) or next((i for i in items if entries[k].applies(i)), None)
            if all(samples[k] is not None for k in wanted):
                break
    todo = list(dict.fromkeys(i for i in samples.values() if i is not None))
    print(f"{len(entries)} entries, {len(todo)} sampled items", file=sys.stderr)
    results = {r.item: r for r in executor.run_items(
        todo, traces_by, jobs, args.backend, lambda r: None, None, executor.ITEM_TIMEOUT)}
    bad = 0
    for k, entry in enumerate(entries):
        item = samples.get(k)
        record = results.get(item)
        ok = record is not None and record.verdict == "known"
        bad += not ok
        what = (f"entry {k} ({', '.join(entry.scenarios)}; {entry.reason[:60]})")
        if item is None:
            print(f"STALE {what}: applies to no item of any scenario", file=OUT)
        elif not ok:
            print(f"STALE {what}: {record.verdict if record else 'no result'} on "
                  f"{item.id}", file=OUT)
            for problem in (record.problems if record else [])[:6]:
                print(f"    {problem}", file=OUT)
            print(f"    {item.replay_command()}", file=OUT)
        else:
            print(f"ok    {what}: known on {item.id}", file=OUT)
    print(f"{len(entries) - bad} of {len(entries)} entries reproduce "
          f"({len(todo)} items, {time.monotonic() - started:.0f}s)", file=OUT)
    return EXIT_FINDINGS if bad else EXIT_OK


def cmd_baseline(args) -> int:
    """The uninjected scenario, every check at every phase, its points recorded."""
    import resource

    from harness import campaign, injection, runner, scenario
    scen = scenario.load(args.scenario)
    endings = args.ending or list(scen.endings)
    campaign.validate(scen, {}, [], endings, [], None, args.window)
    _load(args)
    worst = EXIT_OK
    for ending in endings:
        run = runner.Run(scen, ending)
        result = run.execute(lambda r: injection.Injector(r, None, args.window))
        points = len(run.tracer.points) if run.tracer else 0
        print(f"{scen.name} / {ending}: {'PASS' if result.passed else 'FAIL'} in "
              f"{result.seconds:.1f}s; {points} yield points in window {args.window!r}", file=OUT)
        print(result.report(), file=OUT)
        worst = worst if result.passed and points else EXIT_FINDINGS
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {rss:.0f} MiB", file=OUT)
    return worst


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None


def build_parser():
    from harness.nova_support import BACKENDS
    from harness.tracer import DEFAULT_WINDOW
    p = _Parser(prog="nova-chaos", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    backend = dict(default=None, choices=BACKENDS,
                   help="Nova concurrency backend (default: the one the Nova under test runs "
                   "nova-compute on -- threads on Nova 34 -- or $NOVA_CHAOS_BACKEND)")
    window = dict(default=DEFAULT_WINDOW, help="which stretch of the resize to sweep: 'resize' "
                  "(the design card's: source resize_instance to destination finish_resize) "
                  "or 'lifecycle' (destination prep_resize to the end of the ending)")
    sub.add_parser("scenarios", help="list the scenarios").set_defaults(fn=cmd_scenarios)
    sp = sub.add_parser("points", help="list the yield points of a scenario's window")
    sp.add_argument("scenario")
    sp.add_argument("--backend", **backend)
    sp.add_argument("--fresh", action="store_true", help="ignore the discovery cache")
    sp.add_argument("--window", **window)
    sp.add_argument("--ending", action="append", help="only this ending's points (repeatable)")
    sp.set_defaults(fn=cmd_points)
    sp = sub.add_parser("run", help="inject the periodic at every point (or --point ...)")
    sp.add_argument("scenario", help="a scenario name or .toml path, or 'all'")
    sp.add_argument("--target", action="append", help="source, dest or both (repeatable)")
    sp.add_argument("--ending", action="append",
                    help="confirm, revert or auto-confirm (repeatable; default: the scenario's)")
    sp.add_argument("--window", action="append",
                    help="resize (default) and/or lifecycle (repeatable): " + window["help"])
    sp.add_argument("--point", action="append", help="a point id from 'points' (repeatable)")
    sp.add_argument("--mutate", help="run against a deliberately broken Nova, e.g. 1944759")
    sp.add_argument("--jobs", default="auto",
                    help="items at a time (forked children or worker processes), or 'auto' "
                    "(the default: one per core)")
    sp.add_argument("--mode", choices=("fork", "fresh"),
                    help="fork: reuse the prefix (default on eventlet); fresh: new cloud per item")
    sp.add_argument("--timeout", type=_seconds,
                    help="seconds one item may take before it fails as stuck (default 120)")
    sp.add_argument("--json", help="write a JSON report here (kept up to date while running)")
    sp.add_argument("--resume", action="store_true",
                    help="with --json: run only the items that report has not judged yet "
                    "(one stopped part-way), and keep the rest")
    sp.add_argument("--junit", help="write a JUnit XML report here")
    sp.add_argument("--list", action="store_true",
                    help="print the ids of the items the run would sweep, and run none")
    sp.add_argument("--backend", **backend)
    sp.set_defaults(fn=cmd_run)
    sp = sub.add_parser("replay", help="rerun one item verbosely")
    sp.add_argument("id", help="SCENARIO/POINT/TARGET/ENDING[/window=NAME][/mutate=NAME], as printed")
    sp.add_argument("--backend", **backend)
    sp.set_defaults(fn=cmd_replay)
    sp = sub.add_parser("rejudge", help="judge a JSON report again against the known-findings "
                        "file (after reviewing findings); runs nothing")
    sp.add_argument("report", help="a report written by 'run --json'")
    sp.add_argument("--known", help="a known-findings file (default: scenarios/known-findings.toml)")
    sp.add_argument("--json", help="write the re-judged report here")
    sp.add_argument("--propose", action="store_true",
                    help="print known-findings entries (TOML) covering exactly the failing "
                    "items, for a reviewer to check, explain and paste")
    sp.set_defaults(fn=cmd_rejudge)
    sp = sub.add_parser("known", help="check that every known-findings entry still "
                        "reproduces, on one sampled item each")
    sp.add_argument("--known", help="a known-findings file (default: scenarios/known-findings.toml)")
    sp.add_argument("--jobs", default="auto", help="items at a time, or 'auto' (one per core)")
    sp.add_argument("--backend", **backend)
    sp.set_defaults(fn=cmd_known)
    sp = sub.add_parser("baseline", help="run a scenario uninjected, checking every phase")
    sp.add_argument("scenario")
    sp.add_argument("--ending", action="append")
    sp.add_argument("--window", **window)
    sp.add_argument("--backend", **backend)
    sp.set_defaults(fn=cmd_baseline)
    return p


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        code = args.fn(args)
        OUT.flush()  # a closed reader shows here, not in the interpreter's last flush
        return code
    except UsageError as exc:
        print(f"nova-chaos: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("nova-chaos: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, as Unix tools do;
        # stdout is pointed at devnull so the interpreter's final flush stays quiet
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in {OUT, sys.stdout}:
            os.dup2(devnull, stream.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
