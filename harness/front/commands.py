"""The CLI's other verbs: list scenarios, mutations and points, replay one item,
re-judge a report, check the known findings, run a scenario uninjected."""
from __future__ import annotations

import os
import sys
import time

from harness.errors import UsageError
from harness.front import console
from harness.front.console import EXIT_FINDINGS, EXIT_OK


def cmd_scenarios(args) -> int:
    from harness import scenario
    for name in scenario.available():
        s = scenario.load(name)
        hosts = ", ".join(f"{h.name} ({len(h.cells)} cells, {len(h.cpus)} CPUs)" for h in s.hosts)
        print(f"{name:24} {s.description}\n{'':24} hosts: {hosts}; endings: {', '.join(s.endings)}")
    return EXIT_OK


def cmd_mutations(args) -> int:
    """Every built-in mutation: its name for ``--mutate``, the operation it shows in, its bug;
    then the upstream bugs reviewed and not built in, and why."""
    from harness.cloud import mutations
    for name, mutation in mutations.MUTATIONS.items():
        print(f"{name:24} {mutation.operation:15} {mutation.description}\n"
              f"{'':24} {mutation.bug or '(a self-test of the harness, no upstream bug)'}",
              file=console.OUT)
    for bug, why in mutations.NOT_REPRODUCED.items():
        print(f"{bug:24} {'(not built in)':15} {why}\n{'':24} "
              f"https://bugs.launchpad.net/nova/+bug/{bug}", file=console.OUT)
    return EXIT_OK


def _report(path: str) -> dict:
    """A stored JSON report, or one line naming what is wrong with it."""
    import json
    try:
        with open(path) as fh:
            data = json.load(fh)
        data["meta"], data["items"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: not a nova-chaos JSON report ({exc!r})") from None
    return data


def cmd_causes(args) -> int:
    """Every root cause: its name (for ``--fixed``), class, condition, effect and bug.
    With ``--samples REPORT...``: the samples file ``known`` runs, from those reports."""
    from harness.oracles import causes
    if args.suggest:
        return _suggest(args.suggest, args)
    if args.samples:
        from harness import scenario
        from harness.front import by_cause
        records = []
        for path in args.samples:
            records += _report(path)["items"]
        kept = by_cause.load_samples(os.path.join(scenario.SCENARIO_DIR, by_cause.SAMPLES_FILE))
        text = by_cause.samples_text(records, causes.load(), [os.path.basename(p) for p in args.samples],
                                     kept)
        print(text, end="", file=console.OUT)
        return EXIT_OK
    for c in causes.load():
        when = ", ".join(f"{k} = {' | '.join(map(str, v))}" for k, v in c.when.items())
        print(f"{c.name} ({c.klass}): {c.title}\n    when {when}", file=console.OUT)
        for e in c.effects:
            print(f"    {e.describe()} at {', '.join(e.at)}", file=console.OUT)
        for x in c.expects:
            print(f"    shows [{x.check}] {x.where} = {' or '.join(x.seen)} at {', '.join(x.at)}",
                  file=console.OUT)
        if c.bug:
            print(f"    bug: {c.bug}", file=console.OUT)
    return EXIT_OK


def _suggest(item_id: str, args) -> int:
    """Run one item; print its state and, per checkpoint, a draft of the effects."""
    import json

    from harness.execute import campaign
    from harness.oracles import suggest
    item, scen, traces = validated_item(item_id, args)
    result = campaign.run_item(item, traces)
    print(f"item {item.id}: {result.verdict}", file=console.OUT)
    for role, per_server in sorted(result.state.items()):
        print(f"state where the fault struck ({role}):", file=console.OUT)
        for server, facts in sorted(per_server.items()):
            print(f"    {server}: {json.dumps(facts, sort_keys=True)}", file=console.OUT)
    for name, chosen, left in suggest.suggest(result.checkpoints, result.state, scen):
        print(f"checkpoint {name}:", file=console.OUT)
        for server, effect in chosen:
            print(f"    {suggest.toml_line(name, effect)}  # {server}", file=console.OUT)
        for f in left:
            print(f"    left (an expect?): {f.line()}", file=console.OUT)
    return EXIT_OK


def cmd_points(args) -> int:
    from harness import scenario
    from harness.execute import campaign, discovery
    from harness.cloud import nova_support
    scen = scenario.load(args.scenario)
    campaign.validate(scen, {}, [], args.ending or [], [], args.mutate, args.window)
    console.load(args)
    traces = discovery.discover(scen, args.window, use_cache=not args.fresh, here=True,
                                endings=args.ending, mutation=args.mutate)
    endings = args.ending or list(scen.endings)
    points = campaign.union({e: traces[e] for e in endings})
    for i, p in enumerate(points, 1):
        only = [e for e in endings if p not in traces[e]]
        suffix = f"  (not in: {', '.join(only)})" if only else ""
        print(f"{i:3}. {p}{suffix}", file=console.OUT)
    print(f"{len(points)} yield points in window {args.window!r} of {scen.name}", file=sys.stderr)
    runs = discovery.outcomes(scen, nova_support.current_backend(), endings, args.mutate)
    failing = [r for r in runs.values() if r.verdict not in ("pass", "known")]
    for r in failing:  # the points are listed still; the run that gave them is a finding
        print(f"the uninjected {r.item.ending} run fails ({r.verdict}): {r.problems[0]}; "
              f"{r.item.replay_command()}", file=sys.stderr)
    for r in runs.values():  # a defect of Nova's own path, reviewed: said, not failed
        if r.verdict == "known":
            print(f"the uninjected {r.item.ending} run is known: {r.known[0]}", file=sys.stderr)
    return EXIT_FINDINGS if failing else EXIT_OK


def validated_item(item_id: str, args, refuse=None):
    """An item id parsed and checked against its scenario, Nova loaded, its traces
    discovered: (item, scenario, traces). Every bad part is one UsageError line.

    ``refuse(scen, item)`` may refuse it further before Nova is loaded (export does)."""
    from harness import scenario
    from harness.cloud import nova_support
    from harness.execute import campaign, discovery
    from harness.execute.item import Item
    from harness import faults
    from harness.oracles import known
    item = Item.parse(item_id)
    scen = scenario.load(item.scenario)
    if item.is_uninjected:
        raise UsageError(f"{item_id} is an uninjected run, not an injected item: "
                         f"run it with {item.replay_command()}")
    known.load()
    campaign.validate(scen, {}, [item.target], [item.ending], [], item.mutation, item.window,
                      item.fault)
    if refuse:
        refuse(scen, item)
    console.load(args)
    faults.parse(item.fault).check_backend(nova_support.current_backend())
    traces = discovery.discover(scen, item.window, endings=[item.ending], mutation=item.mutation)
    (uninjected,) = discovery.outcomes(scen, nova_support.current_backend(), [item.ending],
                                       item.mutation).values()
    if uninjected.verdict not in ("pass", "known"):  # run as asked; its start is broken
        print(f"note: the uninjected {item.ending} run of {scen.name} fails too "
              f"({uninjected.problems[0]}): {uninjected.item.replay_command()}", file=sys.stderr)
    campaign.validate(scen, {item.ending: traces[item.ending]}, [item.target], [item.ending],
                      [item.point], item.mutation, item.window, item.fault)
    return item, scen, traces


def cmd_replay(args) -> int:
    from harness.execute import campaign
    from harness.execute.item import Item
    from harness import faults
    from harness.oracles import known
    uninjected = Item.parse(args.id)
    if uninjected.is_uninjected:  # an uninjected item's run is the baseline's
        args.scenario, args.ending, args.mutate = (uninjected.scenario, [uninjected.ending],
                                                   uninjected.mutation)
        return cmd_baseline(args)
    item, _, traces = validated_item(args.id, args)
    result = campaign.run_item(item, traces, detail=True)
    at = result.trace.index(item.point) if item.point in result.trace else -1
    print(f"item {item.id}", file=console.OUT)
    print("calls around the point:", file=console.OUT)
    for i in range(max(0, at - 4), min(len(result.trace), at + 5)):
        print(f"  {'>>' if i == at else '  '} {i + 1:3}. {result.trace[i]}", file=console.OUT)
    print(f"{faults.parse(item.fault).label}: "
          f"{', '.join(result.fired) or 'nowhere (point not reached)'}", file=console.OUT)
    for host, rows in result.changes.items():
        print(f"what the periodic changed on {host}'s watch:", file=console.OUT)
        for path, before, after in rows or [("(nothing)", "", "")]:
            print(f"    {path}: {before!r} -> {after!r}", file=console.OUT)
    for cp in result.checkpoints:
        print(f"checkpoint {cp.name}: {'ok' if cp.passed else ''}", file=console.OUT)
        for f in cp.findings:
            print(f"    {known.classify(f):9} {f.line()}", file=console.OUT)
    for line in result.known:
        print(f"known: {line}", file=console.OUT)
    print(f"verdict: {result.verdict} ({result.seconds:.1f}s)", file=console.OUT)
    for p in result.problems:
        print(f"  {p}", file=console.OUT)
    return EXIT_OK if result.verdict in ("pass", "known") else EXIT_FINDINGS


def cmd_rejudge(args) -> int:
    """Judge a stored report again against today's root causes; nothing is rerun."""
    import collections
    import json

    from harness.execute import campaign
    from harness.front import report
    from harness.oracles import known
    if args.known and not os.path.isfile(args.known):
        raise UsageError(f"point-list file {args.known} does not exist")
    entries = known.load(args.known) if args.known else known.load()
    try:
        with open(args.report) as fh:
            data = json.load(fh)
        records, meta = data["items"], dict(data.get("meta", {}))
        old = campaign.predates_causes(records)
        after = [] if old else [campaign.rejudge(r, entries) for r in records]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UsageError) as exc:
        raise UsageError(f"{args.report}: not a nova-chaos JSON report ({exc!r})") from None
    if old:
        raise UsageError(f"{args.report} was judged before root causes (issue 30): its known "
                         "items name no cause and it kept no state to judge them by; run its "
                         "campaign again (nova-chaos run ... --json) to judge it")
    if args.propose:
        sets = known.point_sets(args.known) if args.known else known.point_sets()
        print(report.proposed_entries(after, sets), file=console.OUT)
        return EXIT_OK
    before = collections.Counter(r["verdict"] for r in records)
    now = collections.Counter(r["verdict"] for r in after)
    grouped = report.failure_groups(after, meta.get("campaigns", []))
    if grouped:
        print(grouped, file=console.OUT)
    verdicts = ("pass", "known", "fail", "error")
    print(f"{len(after)} items of {args.report}: "
          + ", ".join(f"{v} {before[v]} -> {now[v]}" for v in verdicts), file=console.OUT)
    if now["fail"]:
        print("a root cause written or changed since the run is not applied here (its "
              "effects are checked against views a report does not keep): run the failing "
              "items again to judge them by it", file=console.OUT)
    if args.json:
        meta["rejudged"] = os.path.abspath(args.known or known.KNOWN_FILE)
        report.atomic_write(args.json, json.dumps({"meta": meta, "items": after}, indent=2))
    return EXIT_FINDINGS if now["fail"] or now["error"] else EXIT_OK


def cmd_merge(args) -> int:
    """Join the JSON reports of one run's shards (``run --shard K/N``) into one report.

    The shards must be of one plan (the same Nova, backend, mutation, fault,
    campaigns and plan digest), each of 1..N exactly once, and together hold
    every planned item exactly once; anything else is one line naming what
    is wrong, and nothing is written.
    """
    import collections
    import json

    from harness.execute.record import Record
    from harness.front import report
    metas, records = [], []
    for path in args.reports:
        try:
            with open(path) as fh:
                data = json.load(fh)
            meta, items = data["meta"], data["items"]
            meta["shard"]["index"], meta["shard"]["of"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{path}: not the JSON report of a sharded run ({exc!r})") from None
        metas.append((path, meta))
        records += [(path, r) for r in items]
    first_path, first = metas[0]
    same = ("nova", "backend", "mutation", "fault", "campaigns")
    for path, meta in metas[1:]:
        for key in same:
            if meta.get(key) != first.get(key):
                raise UsageError(f"{path} is not a shard of the run {first_path} is "
                                 f"({key}: {meta.get(key)!r} vs {first.get(key)!r})")
        if {k: meta["shard"][k] for k in ("of", "planned", "digest")} != \
                {k: first["shard"][k] for k in ("of", "planned", "digest")}:
            raise UsageError(f"{path} is a shard of another plan than {first_path}")
        if meta["shard"].get("partition") != first["shard"].get("partition"):
            raise UsageError(f"{path} cut the plan otherwise than {first_path} (another "
                             "tree-costs.json or --durations file): run every shard with the same")
    total = first["shard"]["of"]
    seen = collections.Counter(m["shard"]["index"] for _, m in metas)
    missing = [k for k in range(1, total + 1) if not seen[k]]
    twice = sorted(k for k, n in seen.items() if n > 1)
    if missing or twice:
        raise UsageError(f"shards of {total}: missing {missing or 'none'}, given twice {twice or 'none'}")
    partial = [p for p, m in metas if m.get("partial")]
    if partial:
        raise UsageError(f"{partial[0]} is a partial report (the run stopped part-way): "
                         "run its shard to the end (--resume) first")
    ids = collections.Counter(r["id"] for _, r in records)
    doubled = sorted(i for i, n in ids.items() if n > 1)
    if doubled:
        raise UsageError(f"{len(doubled)} item(s) in more than one shard, e.g. {doubled[0]}")
    if len(ids) != first["shard"]["planned"]:
        raise UsageError(f"the shards hold {len(ids)} items, the plan has "
                         f"{first['shard']['planned']}: an item is missing")
    meta = {k: v for k, v in first.items() if k not in ("shard", "seconds", "fork_parents")}
    meta.update(merged=[p for p, _ in metas], shards=total,
                seconds=round(sum(m.get("seconds", 0) for _, m in metas), 1),
                fork_parents=[p for _, m in metas for p in m.get("fork_parents", [])])
    items = [r for _, r in records]
    results = [Record.from_json(r) for r in items]
    from harness.front import by_cause
    from harness.oracles import causes
    fixed = tuple(meta.get("fixed", []))
    meta["causes"] = by_cause.summarize(results, causes.load(), meta.get("campaigns", []))
    for c in meta.get("campaigns", []):
        mine = [r for r in results if r.item.scenario == c["scenario"] and r.item.window == c["window"]]
        print(f"\n{c['scenario']}, window {c['window']!r}:", file=console.OUT)
        print(report.table(mine, c["points"], c["targets"], c["endings"]), file=console.OUT)
    text = json.dumps({"meta": meta, "items": items}, indent=2)
    report.atomic_write(args.json, text)
    print(f"JSON report: {os.path.abspath(args.json)}", file=console.OUT)
    if args.html:
        from harness.front import html
        report.atomic_write(args.html, html.render(json.loads(text)))
        print(f"HTML report: {os.path.abspath(args.html)}", file=console.OUT)
    if args.junit:
        report.atomic_write(args.junit, report.to_junit(
            results, f"nova-chaos.{meta.get('scenario')}", causes=meta["causes"], fixed=fixed))
        print(f"JUnit report: {os.path.abspath(args.junit)}", file=console.OUT)
    for line in by_cause.lines(meta["causes"], fixed):
        print(line, file=console.OUT)
    bad = [r for r in results if r.verdict in ("fail", "error")]
    unsound = [p for p in meta["fork_parents"] if not (p["passed"] and p["trace_matches"])]
    print(f"{len(results)} items from {total} shards; {len(bad)} failed", file=console.OUT)
    return (EXIT_FINDINGS if bad or unsound or by_cause.verdict_problems(meta["causes"], fixed)
            else EXIT_OK)


def cmd_costs(args) -> int:
    """Measure each fork tree's cost from JSON reports into the cost file ``--shard`` reads."""
    from harness.execute import shards
    trees = shards.write_costs(args.reports, args.out)
    total = sum(t["seconds"] for t in trees.values())
    print(f"{len(trees)} fork trees, {sum(t['items'] for t in trees.values())} items, "
          f"{total:.0f} s measured: {os.path.abspath(args.out)}", file=console.OUT)
    return EXIT_OK


def cmd_known(args) -> int:
    """Every known-findings entry still reproduces, on one sampled item each.

    The sample is the first item, in campaign order (scenarios by name, the
    card's window first), that the entry applies to, with one ending per
    entry (revert where it has it: the run discovery slices the card's
    window from, so most scenarios need one discovery run): cheap enough for CI, so
    a Nova that stopped doing what an entry says fails there, not only in
    the full campaign. A sampled item must come out ``known``. With
    ``--scenario``, only the entries whose sample lies in that scenario (CI
    spreads the scenarios over its workers).
    """
    from harness import scenario
    from harness.execute import campaign, discovery, executor, plan
    from harness.explore.tracer import WINDOWS
    from harness import faults
    from harness.oracles import known
    if args.known and not os.path.isfile(args.known):
        raise UsageError(f"point-list file {args.known} does not exist")
    if args.known:  # the sampled items are judged by it, in every process they run in
        os.environ[known.KNOWN_ENV] = os.path.abspath(args.known)
    entries = known.load()
    jobs = console.jobs(args)
    only = args.scenario and scenario.load(args.scenario).name  # an unknown name: one line
    from harness.oracles import causes
    causes.named(args.cause or ())  # an unknown name: one line, before Nova loads
    console.load(args)
    started = time.monotonic()
    bad_causes, n_causes = _known_causes(only, jobs, args.backend, args.samples, args.cause)
    samples, traces_by = {}, {}
    names = list(scenario.available())
    windows = [campaign.DEFAULT_WINDOW] + [w for w in WINDOWS if w != campaign.DEFAULT_WINDOW]
    for name in names[:names.index(only) + 1] if only else names:
        # with --scenario, an earlier scenario matters only for the entries that also cover it
        wanted = [k for k, e in enumerate(entries) if e.covers_scenario(name)
                  and (not only or e.covers_scenario(only)) and samples.get(k) is None]
        if not wanted:
            continue
        scen = scenario.load(name)
        # one ending per entry (a window reaching into the ending discovers each it runs):
        # the one discovery slices the card's window from, if the entry has it
        ending = {k: next((e for e in (discovery.SLICED_FROM, *scen.endings)
                           if e in scen.endings and e in entries[k].endings), None) for k in wanted}
        endings = [e for e in scen.endings if e in ending.values()]
        # the faults the entries name (a glob: the default one's items)
        kinds = list(dict.fromkeys(entries[k].fault if not set("*?[") & set(entries[k].fault)
                                   else faults.DEFAULT for k in wanted))
        for window, fault in ((w, f) for w in (windows if endings else ()) for f in kinds):
            # discovered only while an entry is unsampled
            planned = plan.plan([(scen, window, campaign.choose(scen)[0], endings)], fault=fault)
            traces_by.update(planned.traces)
            items = planned.items
            for k in wanted:
                samples[k] = samples.get(k) or next(
                    (i for i in items if i.ending == ending[k] and entries[k].applies(i)), None)
            if all(samples[k] is not None for k in wanted):
                break
    checked = list(range(len(entries)))
    if only:  # the entries sampled here; one sampled nowhere, in the last scenario it covers
        def last(entry):
            return next((n for n in reversed(names) if entry.covers_scenario(n)), None)
        checked = [k for k in checked if (samples[k].scenario == only if samples.get(k)
                                          else last(entries[k]) == only)]
        samples = {k: samples.get(k) for k in checked}
    todo = list(dict.fromkeys(i for i in samples.values() if i is not None))
    if entries:
        print(f"{len(entries)} entries, {len(todo)} sampled items", file=sys.stderr)
    results = {r.item: r for r in executor.run_items(
        todo, traces_by, jobs, args.backend, lambda r: None, None, executor.ITEM_TIMEOUT)}
    bad = 0
    for k in checked:
        entry, item = entries[k], samples.get(k)
        record = results.get(item)
        ok = record is not None and record.verdict == "known"
        bad += not ok
        what = (f"entry {k} ({', '.join(entry.scenarios)}; {entry.reason[:60]})")
        if item is None:
            print(f"STALE {what}: applies to no item of any scenario", file=console.OUT)
        elif not ok:
            print(f"STALE {what}: {record.verdict if record else 'no result'} on "
                  f"{item.id}", file=console.OUT)
            for problem in (record.problems if record else [])[:6]:
                print(f"    {problem}", file=console.OUT)
            print(f"    {item.replay_command()}", file=console.OUT)
        else:
            print(f"ok    {what}: known on {item.id}", file=console.OUT)
    listed = f" and {len(checked) - bad} of {len(checked)} entries" if entries else ""
    print(f"{n_causes - bad_causes} of {n_causes} root-cause samples{listed} reproduce "
          f"({time.monotonic() - started:.0f}s)", file=console.OUT)
    return EXIT_FINDINGS if bad or bad_causes else EXIT_OK


def _known_causes(only, jobs, backend, per_cause=None, chosen=None) -> tuple:
    """Run every root cause's sample items (``scenarios/cause-samples.toml``), or those in
    scenario ``only``, or those of the ``chosen`` causes, at most ``per_cause`` of each
    (its first listed: the clearest): each must come out known with its cause biting.
    ``(bad, checked)``."""
    from harness import scenario
    from harness.execute import executor, plan
    from harness.execute.item import Item
    from harness.front import by_cause
    from harness.oracles import causes
    names = {c.name for c in causes.load()}
    wanted = [(name, Item.parse(i)) for name, ids in
              by_cause.load_samples(os.path.join(scenario.SCENARIO_DIR, by_cause.SAMPLES_FILE)).items()
              for i in ids[:per_cause] if not chosen or name in chosen]
    wanted = [(n, i) for n, i in wanted if not only or i.scenario == only]
    groups: dict = {}
    own = {}  # a cause of Nova's own path: its sample is discovery's uninjected run (cached)
    for _, item in wanted:
        if item.is_uninjected:
            from harness.cloud import nova_support
            from harness.execute import campaign, discovery
            scen = scenario.load(item.scenario)
            discovery.discover(scen, campaign.DEFAULT_WINDOW, [item.ending], item.mutation)
            own[item.id] = discovery.outcomes(scen, nova_support.current_backend(),
                                              [item.ending], item.mutation)[item.ending]
            continue
        groups.setdefault((item.scenario, item.window, item.fault, item.mutation), []).append(item)
    todo, traces_by = [], {}
    for (name, window, fault, mutation), items in groups.items():
        scen = scenario.load(name)
        planned = plan.plan([(scen, window, sorted({i.target for i in items}),
                              [e for e in scen.endings if e in {i.ending for i in items}])],
                            points=sorted({i.point for i in items}), mutation=mutation, fault=fault)
        for key, traces in planned.traces.items():  # groups of one scenario and window (other
            traces_by.setdefault(key, {}).update(traces)  # faults, endings) share its traces
        have = {i.id for i in planned.items}
        todo += [i for i in items if i.id in have]
    results = {r.item.id: r for r in executor.run_items(
        list(dict.fromkeys(todo)), traces_by, jobs, backend, lambda r: None, None,
        executor.ITEM_TIMEOUT)}
    results.update(own)
    bad = 0
    for name, item in wanted:
        record = results.get(item.id)
        ok = (name in names and record is not None and record.verdict == "known"
              and name in record.causes.get("bit", []))
        bad += not ok
        if ok:
            print(f"ok    root cause {name}: bit on {item.id}", file=console.OUT)
            continue
        why = ("not in the causes file" if name not in names else
               "its point is not in this Nova's trace" if record is None else
               f"{record.verdict}, causes bit: {', '.join(record.causes.get('bit', [])) or 'none'}")
        print(f"STALE root cause {name}: {why} on {item.id}", file=console.OUT)
        for problem in (record.problems if record else [])[:6]:
            print(f"    {problem}", file=console.OUT)
        print(f"    {item.replay_command()}", file=console.OUT)
    return bad, len(wanted)


def cmd_baseline(args) -> int:
    """The uninjected scenario, every check at every phase: exactly the run discovery
    judges (no periodic of the harness's before the deletes), so it fails wherever
    ``run`` reports the uninjected run failing; a reviewed root cause of Nova's own path
    (fault ``none``) makes it known."""
    import resource

    from harness import scenario
    from harness.execute import campaign, discovery
    from harness.explore.tracer import narrowed
    scen = scenario.load(args.scenario)
    endings = args.ending or list(scen.endings)
    window = getattr(args, "window", campaign.DEFAULT_WINDOW)
    campaign.validate(scen, {}, [], endings, [], args.mutate, window)
    console.load(args)
    worst = EXIT_OK
    for ending in endings:
        run = discovery.uninjected_run(scen, ending, args.mutate)
        record = campaign.judge_uninjected(scen.name, ending, args.mutate, run)
        points = len(narrowed(run.tracer.staged(), window)) if run.tracer else 0
        print(f"{scen.name} / {ending}{f' (mutation {args.mutate})' if args.mutate else ''}: "
              f"{record.verdict.upper()} in {run.result.seconds:.1f}s; {points} yield points "
              f"in window {window!r}", file=console.OUT)
        print(run.result.report(), file=console.OUT)
        for line in record.known:  # what a reviewed root cause of Nova's own path explains
            print(f"  known: {line}", file=console.OUT)
        for problem in record.of_kind("error"):
            print(f"  {problem}", file=console.OUT)
        if record.verdict == "error":  # it stopped short: what Nova warned of last
            for line in record.log[-8:]:  # errors inside casts and periodics are only logged
                print(f"  log: {line}", file=console.OUT)
        worst = worst if record.verdict in ("pass", "known") and points else EXIT_FINDINGS
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {rss:.0f} MiB", file=console.OUT)
    return worst


def cmd_html(args) -> int:
    """A stored JSON report as a self-contained HTML page; runs nothing."""
    import json

    from harness.front import html, report
    if not os.path.isfile(args.report):
        raise UsageError(f"report {args.report} does not exist")
    try:
        with open(args.report) as fh:
            data = json.load(fh)
        page = html.render(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{args.report} is not a nova-chaos JSON report ({type(exc).__name__}: "
                         f"{exc})") from None
    out = args.out or os.path.splitext(args.report)[0] + ".html"
    report.atomic_write(out, page)
    print(f"HTML report: {os.path.abspath(out)}", file=console.OUT)
    return EXIT_OK
