"""``nova-chaos export`` and ``nova-chaos report``: an item as Nova's own regression
test, and as an upstream bug text (harness.upstream)."""
from __future__ import annotations

import os

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
    from harness.upstream import export
    if (args.id is None) + (not args.all_hard) + (args.cause is None) != 2:
        raise UsageError("export needs one of: an item id, --cause NAME, --all-hard")
    ids = ([i.id for i in export.hard_items()] if args.all_hard else
           [export.item_of_cause(args.cause).id] if args.cause else [args.id])
    index, skipped = [], []
    for item_id in ids:
        try:
            item, scen, record, found = _prepare(item_id, args)
            out = export.build(item, scen, record, found)
        except UsageError as exc:
            if not args.all_hard:
                raise
            skipped.append((item_id, str(exc)))
            print(f"not exported: {exc}", file=console.OUT)
            continue
        from harness.upstream import bugreport
        _write(args.out, out.module_name + ".py", out.text)
        _write(args.out, out.module_name + ".txt", bugreport.render(item, scen, record, found, out))
        print(f"wrote {os.path.join(args.out, out.module_name)}.py: {out.test_id} "
              f"(the harness: {record.verdict}), and its bug text (.txt)", file=console.OUT)
        index.append(out)
    if args.all_hard:  # each shipped test's outcome on this Nova, in the index
        outcomes = {out.module_name: _outcome(args.out, out.module_name) for out in index}
        _write(args.out, "README.md", export.index(index, skipped, outcomes))
    print(f"run: cd {args.out} && python -m testtools.run MODULE", file=console.OUT)
    return EXIT_OK


def _outcome(directory: str, module: str) -> str:
    """Run an exported module as a Nova developer would; what it says, in one line."""
    import subprocess
    import sys
    import time
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "testtools.run", module], cwd=directory,
                              capture_output=True, text=True, timeout=600,
                              env=dict(os.environ, PYTHONWARNINGS="ignore"))
    except subprocess.TimeoutExpired:
        return "stuck: no result in 600 s"
    text = proc.stdout + proc.stderr
    problems = [line.strip() for line in text.splitlines()
                if line.startswith(("  after-", "  verify-"))]  # the failure's list (prelude)
    if proc.returncode == 0:
        outcome = "passes"
    elif problems:
        outcome = f"fails: {len(problems)} problems, first `{problems[0][:160]}`"
    else:
        outcome = f"errors: {(text.strip().splitlines() or ['?'])[-1][:160]}"
    print(f"ran {module}: {outcome} ({time.monotonic() - started:.1f} s)", file=console.OUT)
    return outcome


def _write(directory: str, name: str, text: str) -> None:
    from harness import files
    os.makedirs(directory, exist_ok=True)  # only once there is something to write
    files.atomic_write(os.path.join(directory, name), text)


def cmd_report(args) -> int:
    from harness import files
    from harness.upstream import bugreport, export
    if (args.id is None) == (args.cause is None):
        raise UsageError("report needs an item id or --cause NAME (not both)")
    item_id = export.item_of_cause(args.cause).id if args.cause else args.id
    item, scen, record, found = _prepare(item_id, args)
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
