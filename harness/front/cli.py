"""``nova-chaos``: list scenarios and points, run a campaign, replay one item.

Exit codes: 0 all items pass, 1 findings (an item that failed or proved
nothing, the uninjected run's first), 2 usage or environment error, 3 the
harness itself could not run (a subprocess of its own died).
Nova is imported only after the backend is chosen, and only by verbs that
need it.
"""
from __future__ import annotations

import argparse
import os
import sys

from harness.errors import EXIT_BROKEN, EXIT_USAGE, REASON_PREFIX, HarnessError, UsageError
from harness.execute import shards
from harness.front import commands, console, run_command, upstream_commands


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, like every other usage error
        raise UsageError(f"{self.prog}: {message}")


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive whole number: {text!r}")
    return int(text)


def build_parser():
    from harness.cloud.nova_support import BACKENDS
    from harness.explore.tracer import DEFAULT_WINDOW
    from harness import faults
    from harness.execute import executor
    p = _Parser(prog="nova-chaos", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    backend = dict(default=None, choices=BACKENDS,
                   help="Nova concurrency backend (default: the one the Nova under test runs "
                   "nova-compute on -- threads on Nova 34 -- or $NOVA_CHAOS_BACKEND)")
    window = dict(default=DEFAULT_WINDOW, help="which stretch of the move to sweep: 'resize' "
                  "(the operation's core, where both hosts hold the guest: the design card's "
                  "source resize_instance to destination finish_resize; a live migration's "
                  "job until its outcome) or 'lifecycle' (from the destination's claim to "
                  "the end of the ending)")
    sub.add_parser("scenarios", help="list the scenarios").set_defaults(fn=commands.cmd_scenarios)
    sub.add_parser("mutations", help="list the built-in mutations (--mutate NAME): "
                   "upstream bugs re-introduced at run time, and self-tests").set_defaults(
        fn=commands.cmd_mutations)
    sp = sub.add_parser("causes", help="list the root causes (scenarios/root-causes.toml): the "
                        "condition and effect of each known finding")
    sp.add_argument("--samples", nargs="+", metavar="REPORT",
                    help="print the samples file `known` runs (scenarios/cause-samples.toml): "
                    "each cause's clearest item per scenario in these JSON reports")
    sp.add_argument("--suggest", metavar="ITEM",
                    help="run one item and propose, per checkpoint, the fewest effects that "
                    "explain its findings (a draft for a new cause's `effect`, to review)")
    sp.add_argument("--backend", **backend)
    sp.set_defaults(fn=commands.cmd_causes)
    sp = sub.add_parser("points", help="list the yield points of a scenario's window")
    sp.add_argument("scenario")
    sp.add_argument("--backend", **backend)
    sp.add_argument("--fresh", action="store_true", help="ignore the discovery cache")
    sp.add_argument("--window", **window)
    sp.add_argument("--ending", action="append", help="only this ending's points (repeatable)")
    sp.add_argument("--mutate", help="discover against a deliberately broken Nova")
    sp.set_defaults(fn=commands.cmd_points)
    sp = sub.add_parser("run", help="inject the periodic at every point (or --point ...)")
    sp.add_argument("scenario", help="a scenario name or .toml path, or 'all'")
    sp.add_argument("--target", action="append", help="source, dest or both (repeatable)")
    sp.add_argument("--ending", action="append",
                    help="confirm, revert or auto-confirm; a live migration's success or "
                    "rollback (repeatable; default: the scenario's)")
    sp.add_argument("--window", action="append",
                    help="resize (default) and/or lifecycle (repeatable): " + window["help"])
    sp.add_argument("--point", action="append", help="a point id from 'points' (repeatable)")
    sp.add_argument("--mutate", help="run against a deliberately broken Nova, e.g. 1944759 "
                    "(see 'nova-chaos mutations')")
    sp.add_argument("--fixed", action="append", default=[], metavar="CAUSE",
                    help="a root cause (scenarios/root-causes.toml) the Nova under test is "
                    "meant to fix: it must bite nowhere (items where it still does fail), "
                    "and it no longer reproducing is the run's success (repeatable)")
    sp.add_argument("--fault", type=faults.checked, default=faults.DEFAULT,
                    help=faults.help_text())
    sp.add_argument("--shard", metavar="K/N",
                    help="run only the K-th of N deterministic slices of the campaign (one "
                    "per CI machine; 'nova-chaos merge' joins their reports)")
    sp.add_argument("--durations", metavar="FILE",
                    help="with --shard: balance the shares by the seconds this earlier JSON "
                    "report measured per fork tree (default: scenarios/tree-costs.json)")
    sp.add_argument("--jobs", default="auto",
                    help="items at a time (forked children or worker processes), or 'auto' "
                    "(the default: one per core)")
    sp.add_argument("--mode", choices=executor.MODES,
                    help="fork: reuse the prefix (the default where os.fork exists); "
                    "fresh: a new cloud per item")
    sp.add_argument("--timeout", type=_seconds,
                    help="seconds one item may take before it fails as stuck (default 120)")
    sp.add_argument("--no-memo", dest="memo", action="store_false",
                    help="fork mode: run every item's continuation, even where its state "
                    "equals the uninjected run's (by default it inherits that run's)")
    sp.add_argument("--json", help="write a JSON report here (kept up to date while running)")
    sp.add_argument("--resume", action="store_true",
                    help="with --json: run only the items that report has not judged yet "
                    "(one stopped part-way), and keep the rest")
    sp.add_argument("--junit", help="write a JUnit XML report here")
    sp.add_argument("--html", help="write a self-contained HTML report here (the grid, and a "
                    "timeline per failing or known item; the JUnit report links to it)")
    sp.add_argument("--list", action="store_true",
                    help="print the ids of the items the run would sweep, and run none")
    sp.add_argument("--backend", **backend)
    sp.set_defaults(fn=run_command.cmd_run)
    sp = sub.add_parser("replay", help="rerun one item verbosely (an uninjected item's id "
                        "runs its baseline)")
    sp.add_argument("id", help="SCENARIO/POINT/TARGET/ENDING[/window=NAME][/mutate=NAME], as printed")
    sp.add_argument("--backend", **backend)
    sp.set_defaults(fn=commands.cmd_replay)
    sp = sub.add_parser("export", help="write one item as a standalone Nova regression test "
                        "(Nova's own fixtures only; resize and cold migration, the whole periodic)")
    sp.add_argument("id", nargs="?", help="SCENARIO/POINT/TARGET/ENDING[/window=NAME], as printed")
    sp.add_argument("--cause", help="instead of an item: root cause NAME's clearest item")
    sp.add_argument("--out", default=".", help="directory to write the test module (and its bug "
                    "text, MODULE.txt) in (default: .)")
    sp.add_argument("--backend", **backend)
    sp.set_defaults(fn=upstream_commands.cmd_export)
    sp = sub.add_parser("recreate", help="write root causes as recreate tests in Nova's idiom "
                        "(pass on this Nova, the bug under a FIXME) and their fixed forms")
    sp.add_argument("cause", nargs="*", help="root cause names (see 'nova-chaos causes')")
    sp.add_argument("--all-hard", action="store_true", help="every hard root cause a recreate "
                    "test can show (the others are listed, with why, in the index)")
    sp.add_argument("--out", default=".", help="directory: recreate/, fixed/ and bugs/ are "
                    "written there (default: .)")
    sp.add_argument("--windows", action="append", metavar="REPORT.json",
                    help="campaign reports (run --json) whose root causes' windows the bug "
                    "texts give, kept in OUT/bugs/windows.json for later runs (repeatable)")
    sp.add_argument("--jobs", default="1", help="the causes are shared "
                    "among this many processes (default: 1)")
    sp.add_argument("--rows", help=argparse.SUPPRESS)  # a --jobs worker's: its index rows
    sp.add_argument("--backend", **backend)
    sp.set_defaults(fn=upstream_commands.cmd_recreate)
    sp = sub.add_parser("report", help="an upstream-ready bug text for one item: steps, "
                        "expected vs actual, the calls around the point, the cause, the replay")
    sp.add_argument("id", nargs="?", help="SCENARIO/POINT/TARGET/ENDING[/window=NAME], as printed")
    sp.add_argument("--cause", help="instead of an item: root cause NAME's bug text, as "
                    "recreate writes it")
    sp.add_argument("--out", help="write it here (default: print it)")
    sp.add_argument("--backend", **backend)
    sp.set_defaults(fn=upstream_commands.cmd_report)
    sp = sub.add_parser("prove", help="apply a Nova patch to a copy of the Nova under test, run "
                        "the same campaign on both and compare per root cause")
    sp.add_argument("patch", help="a patch against the Nova under test (git diff: a/nova/...)")
    sp.add_argument("--fixed", action="append", metavar="CAUSE",
                    help="a root cause the patch is meant to fix (repeatable; default: "
                    "the patch's 'Fixes:' lines)")
    sp.add_argument("--scenario", action="append",
                    help="scenarios to sweep (repeatable; default pinned-hugepages)")
    sp.add_argument("--window", action="append", help="windows (default resize and lifecycle)")
    sp.add_argument("--fault", type=faults.checked, default=faults.DEFAULT,
                    help=f"the fault to inject: {faults.SPECS} (default {faults.DEFAULT})")
    sp.add_argument("--ending", action="append", help="endings (default: the scenario's)")
    sp.add_argument("--point", action="append", help="only these point ids (default: every one)")
    sp.add_argument("--target", action="append", help="source, dest or both (default: each)")
    sp.add_argument("--jobs", default="auto", help="items at a time per campaign")
    sp.add_argument("--recreate", action="append",
                    help="a recreate test (Nova's style: it asserts the bug under a FIXME): "
                    "must pass before the patch and fail after (a file or a dotted name)")
    sp.add_argument("--test", action="append",
                    help="a test that must pass after the patch (the recreate test's fixed "
                    "form; a file or a dotted name; repeatable)")
    sp.add_argument("--nova-tests", action="store_true",
                    help="also run Nova's own tests for the area on the patched copy")
    sp.add_argument("--out", help="where the campaigns' reports go (default reports/prove-NAME)")
    sp.set_defaults(fn=upstream_commands.cmd_prove)
    sp = sub.add_parser("rejudge", help="judge a JSON report again against today's root causes "
                        "as the run attributed them (a cause removed no longer explains its "
                        "findings) and a point-list file; runs nothing (a new or changed "
                        "cause's effects need the views: run the items again)")
    sp.add_argument("report", help="a report written by 'run --json'")
    sp.add_argument("--known", help="also a point-list file of known findings (none shipped)")
    sp.add_argument("--json", help="write the re-judged report here")
    sp.add_argument("--propose", action="store_true",
                    help="print point-list entries (TOML) covering exactly the failing "
                    "items, for a reviewer to check, explain and paste")
    sp.set_defaults(fn=commands.cmd_rejudge)
    sp = sub.add_parser("merge", help="join the JSON reports of a run's shards (run --shard K/N) "
                        "into one report; fails on a missing or duplicated item")
    sp.add_argument("reports", nargs="+", help="the shards' JSON reports, one per shard")
    sp.add_argument("--json", required=True, help="write the merged JSON report here")
    sp.add_argument("--junit", help="write the merged JUnit XML report here")
    sp.add_argument("--html", help="write the merged report as a self-contained HTML page here")
    sp.set_defaults(fn=commands.cmd_merge)
    sp = sub.add_parser("costs", help="measure each fork tree's seconds from JSON reports "
                        "(run --json, merge) into the cost file run --shard balances by")
    sp.add_argument("reports", nargs="+", help="JSON reports (a later one's trees win)")
    sp.add_argument("--out", default=shards.COSTS_FILE,
                    help="where to write it (default: the repository's scenarios/tree-costs.json)")
    sp.set_defaults(fn=commands.cmd_costs)
    sp = sub.add_parser("html", help="render a JSON report (run --json, merge, rejudge --json) "
                        "as a self-contained HTML page")
    sp.add_argument("report", help="a JSON report")
    sp.add_argument("--out", help="where to write it (default: the report's name, .html)")
    sp.set_defaults(fn=commands.cmd_html)
    sp = sub.add_parser("known", help="check that every root cause still reproduces, on its "
                        "sampled items (scenarios/cause-samples.toml)")
    sp.add_argument("--known", help="also a point-list file of known findings (none shipped)")
    sp.add_argument("--jobs", default="auto", help="items at a time, or 'auto' (one per core)")
    sp.add_argument("--scenario", help="only the samples in this scenario")
    sp.add_argument("--cause", action="append", metavar="NAME",
                    help="only this root cause's samples (repeatable; `nova-chaos causes` "
                    "lists them)")
    sp.add_argument("--samples", type=_positive, default=None, metavar="N",
                    help="at most N samples per cause, its first listed (default: all; "
                    "CI runs 1: every cause, its clearest item)")
    sp.add_argument("--backend", **backend)
    sp.set_defaults(fn=commands.cmd_known)
    sp = sub.add_parser("baseline", help="run a scenario uninjected, checking every phase: the "
                        "run every item starts from (exit 1 if it fails: a finding without "
                        "any injection)")
    sp.add_argument("scenario")
    sp.add_argument("--ending", action="append", help="only this ending (repeatable)")
    sp.add_argument("--window", **window)
    sp.add_argument("--mutate", help="run against a deliberately broken Nova")
    sp.add_argument("--backend", **backend)
    sp.set_defaults(fn=commands.cmd_baseline)
    return p


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        code = args.fn(args)
        console.OUT.flush()  # a closed reader shows here, not in the interpreter's last flush
        return code
    except UsageError as exc:
        print(f"{REASON_PREFIX}{exc}", file=sys.stderr)
        return EXIT_USAGE
    except HarnessError as exc:
        print(f"{REASON_PREFIX}{exc}", file=sys.stderr)
        return EXIT_BROKEN
    except KeyboardInterrupt:
        print("nova-chaos: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, as Unix tools do;
        # stdout is pointed at devnull so the interpreter's final flush stays quiet
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in {console.OUT, sys.stdout}:
            os.dup2(devnull, stream.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
