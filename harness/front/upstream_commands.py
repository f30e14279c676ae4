"""The upstream verbs (harness.upstream): ``export`` an item as a standalone Nova test,
``recreate`` a root cause as Nova's recreate test and its fixed form, ``report`` either as
a bug text, ``prove`` a Nova patch."""
from __future__ import annotations

import os
import sys

from harness.errors import UsageError
from harness.front import console
from harness.front.console import EXIT_OK


def _prepare(item_id: str, args):
    """Validate the item, run it (judged, with detail) counting its trigger."""
    from harness.front.commands import validated_item
    from harness.upstream import export, trigger
    item, scen, traces = validated_item(item_id, args, refuse=export.refuse_unsupported)
    found, record = trigger.find(scen, item, traces)
    return item, scen, record, found


def cmd_export(args) -> int:
    from harness.upstream import bugreport, export
    if (args.id is None) == (args.cause is None):
        raise UsageError("export needs an item id or --cause NAME (not both); one recreate "
                         "test per hard root cause: nova-chaos recreate --all-hard")
    item_id = export.item_of_cause(args.cause).id if args.cause else args.id
    item, scen, record, found = _prepare(item_id, args)
    out = export.build(item, scen, record, found)
    _write(args.out, out.module_name + ".py", out.text)
    _write(args.out, out.module_name + ".txt", bugreport.render(item, scen, record, found, out))
    print(f"wrote {os.path.join(args.out, out.module_name)}.py: {out.test_id} "
          f"(the harness: {record.verdict}), and its bug text (.txt)", file=console.OUT)
    print(f"run: cd {args.out} && python -m testtools.run {out.module_name}", file=console.OUT)
    return EXIT_OK


def _write(directory: str, name: str, text: str) -> None:
    from harness import files
    os.makedirs(directory, exist_ok=True)  # only once there is something to write
    files.atomic_write(os.path.join(directory, name), text)


def cmd_report(args) -> int:
    from harness import files
    from harness.upstream import bugreport, export
    if (args.id is None) == (args.cause is None):
        raise UsageError("report needs an item id or --cause NAME (not both)")
    if args.cause:  # the cause's text, as recreate writes it beside its test
        from harness import scenario as scenario_mod
        from harness.oracles import causes
        (cause,) = causes.named([args.cause])
        rec, _ = _recreate_one(cause, args, say=sys.stderr)
        text = bugreport.cause_text(rec, scenario_mod.load(rec.item.scenario))
    else:
        item, scen, record, found = _prepare(args.id, args)
        exported = export.build(item, scen, record, found)
        text = bugreport.render(item, scen, record, found, exported)
    if args.out:
        files.atomic_write(args.out, text)
        print(f"wrote {args.out}", file=console.OUT)
    else:
        print(text, file=console.OUT)
    return EXIT_OK


def cmd_prove(args) -> int:
    """Apply a patch to a copy of the Nova under test, run the same campaign on both and
    compare per root cause; run the given tests (and Nova's own, with --nova-tests) on both."""
    from harness import scenario
    from harness.front.console import EXIT_FINDINGS
    from harness.oracles import causes
    from harness.upstream import nova_tests, prove
    known = {c.name for c in causes.load()}
    if args.fixed is None and os.path.isfile(args.patch):  # the patch says what it fixes
        args.fixed = prove.fixes(args.patch) or None
    for name in args.fixed or []:
        if name not in known:
            raise UsageError(f"unknown root cause {name!r} (see 'nova-chaos causes')")
    names = [scenario.load(s).name for s in (args.scenario or ["pinned-hugepages"])]
    run_args = [a for w in (args.window or ["resize", "lifecycle"]) for a in ("--window", w)]
    run_args += ["--fault", args.fault, "--jobs", str(args.jobs)]
    run_args += [a for e in args.ending or [] for a in ("--ending", e)]
    run_args += [a for p in args.point or [] for a in ("--point", p)]
    run_args += [a for t in args.target or [] for a in ("--target", t)]
    out = os.path.abspath(args.out or os.path.join(
        "reports", "prove-" + os.path.splitext(os.path.basename(args.patch))[0]))
    os.makedirs(out, exist_ok=True)
    with prove.PatchedNova(args.patch) as patched:
        sides = {"before": ({}, os.environ.copy(), []), "after": ({}, patched.env(), args.fixed or [])}
        for side, (results, env, fixed) in sides.items():
            for name in names:
                print(f"{side} the patch: {name} ...", file=console.OUT, flush=True)
                results[name] = prove.campaign(
                    name, run_args, os.path.join(out, f"{side}-{name}.json"),
                    os.path.join(out, f"{side}-{name}.log"), env, fixed)
        problems = []
        for name in names:
            before, after = sides["before"][0][name], sides["after"][0][name]
            print(f"\n{name} ({after.items} items; reports in {out}):", file=console.OUT)
            for line in prove.table(before, after, args.fixed or []):
                print("  " + line, file=console.OUT)
            problems += [f"{name}: {p}" for p in prove.verdict(before, after, args.fixed or [])]
        problems += prove.unshown(list(sides["before"][0].values()), args.fixed or [])
        for test, flips in [(t, True) for t in args.recreate or []] + [
                (t, False) for t in args.test or []]:
            was = nova_tests.run([test], env=os.environ.copy())
            now = nova_tests.run([test], env=patched.env())
            kind = "recreate test" if flips else "test"
            print(f"\n{kind} {test}:\n  before: {was[1]}\n  after:  {now[1]}", file=console.OUT)
            if flips and was[0]:
                problems.append(f"recreate test {test} fails before the patch (it must pass "
                                "on the buggy Nova)")
            if flips and not now[0]:
                problems.append(f"recreate test {test} still passes after the patch")
            if not flips and now[0]:
                problems.append(f"test {test} fails after the patch")
        if args.nova_tests:  # some may fail in any environment: only more failing counts
            was = nova_tests.run(list(nova_tests.AREA), env=os.environ.copy())
            now = nova_tests.run(list(nova_tests.AREA), env=patched.env())
            print(f"\nNova's tests for the area:\n  before: {was[1]}\n  after:  {now[1]}",
                  file=console.OUT)
            if nova_tests.bad(now[1]) > nova_tests.bad(was[1]):
                problems.append("more of Nova's own tests for the area fail after the patch")
    print("", file=console.OUT)
    for p in problems:
        print(f"NOT PROVEN: {p}", file=console.OUT)
    if not problems:
        print(f"proven: {', '.join(args.fixed or []) or 'nothing targeted'}; nothing new bites",
              file=console.OUT)
    return EXIT_FINDINGS if problems else EXIT_OK


def cmd_recreate(args) -> int:
    """Write each root cause as a recreate test and its fixed form; run both on this Nova:
    the recreate test must pass and its fixed form fail (its assertions bite)."""
    from harness.front.console import EXIT_FINDINGS
    from harness.oracles import causes
    from harness.upstream import recreate
    by_name = {c.name: c for c in causes.load()}
    if args.all_hard == bool(args.cause):
        raise UsageError("recreate needs root cause names or --all-hard (not both)")
    chosen = ([c for c in by_name.values() if c.klass == "hard"] if args.all_hard
              else causes.named(args.cause))
    windows = _windows(os.path.join(args.out, "bugs", "windows.json"), args.windows or [])
    jobs = console.jobs(args)
    if jobs > 1 and len(chosen) > 1:
        rows = _recreate_in_workers([c.name for c in chosen], args, jobs)
    else:
        rows = _recreate_here(chosen, args, windows, tolerant=args.all_hard or bool(args.rows))
    if args.rows:  # a worker's: the parent writes the index
        import json
        from harness import files
        files.atomic_write(args.rows, json.dumps(rows))
    else:
        hard = [c.name for c in by_name.values() if c.klass == "hard"]
        _index(os.path.join(args.out, "recreate"), rows, hard, set(by_name))
    bad = sum(1 for r in rows if "module" in r and (not r["recreate"].startswith("passes")
                                                    or r["fixed"].startswith("passes")))
    return EXIT_FINDINGS if bad else EXIT_OK


def _recreate_here(chosen, args, windows: dict, tolerant: bool) -> list:
    """Write each cause's test, fixed form and bug text: the index rows (dicts)."""
    from harness import scenario as scenario_mod
    from harness.upstream import bugreport, prove
    env = os.environ.copy()  # as it was before Nova loaded here (it sets its backend's)
    rows = []
    for cause in chosen:
        try:
            out, outcome = _recreate_one(cause, args, verify=lambda rec: _verified(rec, env))
        except UsageError as exc:
            if not tolerant:
                raise
            rows.append({"cause": cause.name, "skipped": str(exc)})
            print(f"not written: {exc}", file=console.OUT)
            continue
        for kind, text in (("recreate", out.text), ("fixed", out.fixed_text)):
            _write(os.path.join(args.out, kind), out.module_name + ".py", text)
            print(f"wrote {os.path.join(args.out, kind, out.module_name)}.py: {outcome[kind]}",
                  file=console.OUT)
        fix = prove.fix_for(os.path.join(args.out, "fixes"), cause.name)
        text = bugreport.cause_text(out, scenario_mod.load(out.item.scenario), fix,
                                    windows.get(cause.name, {}))
        _write(os.path.join(args.out, "bugs"), cause.name + ".txt", text)
        rows.append({"cause": cause.name, "module": out.module_name, "item": out.item.id,
                     "how": out.how, "recreate": outcome["recreate"],
                     "fixed": outcome["fixed"]})
    return rows


def _index(directory: str, rows: list, hard: list, names: set | None = None) -> None:
    """Merge ``rows`` into the index kept in ``directory`` (``index.json``: a later run of
    some causes replaces their rows only) and write its README from it; the rows of a
    cause no longer in ``names`` (removed, renamed or split) are dropped."""
    import json
    from harness.upstream import recreate
    kept = os.path.join(directory, "index.json")
    merged = {}
    if os.path.exists(kept):
        with open(kept) as fh:
            merged = {r["cause"]: r for r in json.load(fh)}
    merged.update({r["cause"]: r for r in rows})
    if names is not None:
        merged = {n: r for n, r in merged.items() if n in names}
    ordered = [merged.get(n, {"cause": n, "skipped": "not run yet"}) for n in hard]
    ordered += [r for n, r in merged.items() if n not in hard]  # a cause no longer hard
    _write(directory, "index.json", json.dumps(ordered, indent=1) + "\n")
    _write(directory, "README.md", recreate.index(ordered))


def _recreate_in_workers(names: list, args, jobs: int) -> list:
    """``recreate`` of ``names`` shared round-robin among ``jobs`` processes (each loads
    Nova and runs its causes' harness runs and tests); their rows, in ``names``' order."""
    import json
    import subprocess
    import tempfile
    parts = [names[k::jobs] for k in range(jobs) if names[k::jobs]]
    with tempfile.TemporaryDirectory(prefix="recreate-rows-") as scratch:
        procs = []
        for k, part in enumerate(parts):
            rows = os.path.join(scratch, f"{k}.json")
            cmd = [sys.executable, "-m", "harness", "recreate", "--out", args.out,
                   "--rows", rows, *(["--backend", args.backend] if args.backend else []), *part]
            procs.append((subprocess.Popen(cmd), rows))
        found = {}
        for proc, rows in procs:
            proc.wait()
            if not os.path.exists(rows):
                raise UsageError(f"recreate: a worker failed (exit {proc.returncode})")
            with open(rows) as fh:
                found.update({r["cause"]: r for r in json.load(fh)})
    return [found[n] for n in names]


def _windows(kept: str, reports: list) -> dict:
    """cause -> "scenario/window" -> its span: those kept at ``kept``, updated from the
    campaign ``reports`` given (then kept again)."""
    import json
    from harness import files
    windows: dict = {}
    if os.path.exists(kept):
        with open(kept) as fh:
            windows = json.load(fh)
    for path in reports:
        try:
            with open(path) as fh:
                summary = json.load(fh)["meta"]["causes"]
        except (OSError, ValueError, KeyError) as exc:
            raise UsageError(f"--windows {path}: not a campaign report ({exc})") from None
        for name, entry in summary.items():
            windows.setdefault(name, {}).update(entry["window"])
    if reports:
        os.makedirs(os.path.dirname(kept), exist_ok=True)
        files.atomic_write(kept, json.dumps(windows, indent=1, sort_keys=True) + "\n")
    return windows


def _verified(rec, env) -> dict:
    """Run ``rec``'s recreate test and its fixed form on this Nova (in a scratch
    directory): kind -> "passes (summary)" or "fails (summary)"."""
    import shutil
    import tempfile
    from harness.upstream import nova_tests
    outcome = {}
    with tempfile.TemporaryDirectory(prefix="recreate-") as scratch:
        for kind, text in (("recreate", rec.text), ("fixed", rec.fixed_text)):
            _write(os.path.join(scratch, kind), rec.module_name + ".py", text)
            rc, summary = nova_tests.run([os.path.join(scratch, kind, rec.module_name + ".py")],
                                         env=env, timeout=600)
            outcome[kind] = ("passes" if rc == 0 else "fails") + f" ({summary})"
        keep = env.get(KEEP_FAILED)
        if keep and not (outcome["recreate"].startswith("passes")
                         and outcome["fixed"].startswith("fails")):
            # a developer's look at why: the modules, run again by hand
            where = os.path.join(keep, f"{rec.module_name}-{rec.boundary.short or 'none'}"
                                 + ("-after" if rec.boundary.after else ""))
            shutil.rmtree(where, ignore_errors=True)
            shutil.copytree(scratch, where)
    return outcome


#: a directory where recreate keeps the modules of a boundary whose test did not come out
KEEP_FAILED = "NOVA_CHAOS_KEEP_FAILED"


def _recreate_one(cause, args, say=None, verify=None) -> tuple:
    """The first of ``cause``'s samples a recreate test can show, moved to its nearest
    boundary where it bites and (``verify``: rec -> outcome) where the recreate test
    passes on this Nova and its fixed form fails: ``(Recreate, outcome)``."""
    from harness.front import by_cause
    from harness.front.commands import validated_item
    from harness import scenario as scenario_mod
    from harness.execute.item import Item
    from harness.upstream import recreate
    samples = by_cause.load_samples(os.path.join(scenario_mod.SCENARIO_DIR, by_cause.SAMPLES_FILE))
    problems = []
    out = say or console.OUT
    for item_id in samples.get(cause.name, []):
        item = Item.parse(item_id)
        try:
            recreate.refuse_item(item)
            if item.is_uninjected:  # Nova's own path: nothing to move to a boundary
                scen = scenario_mod.load(item.scenario)
                console.load(args)
                found = recreate.uninjected(item, scen)
            else:
                item, scen, traces = validated_item(item_id, args)
                found = recreate.bites(cause, item, scen, traces,
                                       say=lambda line: print(line, file=out))
            print(f"{cause.name}: {item.id}", file=out)
            for at, run, record, found in found:
                try:
                    rec = recreate.build(cause, at, scen, run, record, found)
                except UsageError as exc:
                    problems.append(str(exc))
                    continue
                outcome = verify(rec) if verify else None
                if outcome is None or (outcome["recreate"].startswith("passes")
                                       and outcome["fixed"].startswith("fails")):
                    return rec, outcome
                print(f"  as a test: recreate {outcome['recreate']}, fixed {outcome['fixed']}",
                      file=out)
                problems.append(f"at {rec.boundary.short} its recreate test "
                                f"{outcome['recreate'].split(' (')[0]}, its fixed form "
                                f"{outcome['fixed'].split(' (')[0]}")
        except UsageError as exc:
            problems.append(str(exc))
    problems = list(dict.fromkeys(problems))
    raise UsageError(f"root cause {cause.name}: no sample makes a recreate test"
                     + (f" ({'; '.join(problems)})" if problems else " (it has no sample)"))
