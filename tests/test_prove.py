"""``nova-chaos prove``: a Nova patch judged by the campaign on both Novas, per root cause.

The shipped candidate fix for revert-gap-source (docs/upstream/fixes) must be
proven at the window's first point -- the cause bit before, bites nowhere
after, nothing new -- and the recreate test must flip: it passes on Nova 34
and its fixed form passes only on the patched copy.
"""
import os

from tests.conftest import ROOT, cli

FIXES = os.path.join(ROOT, "docs", "upstream", "fixes")
RECREATE = os.path.join(ROOT, "docs", "upstream", "recreate", "test_revert_gap_source.py")
FIXED = os.path.join(ROOT, "docs", "upstream", "fixed", "test_revert_gap_source.py")
POINT = "dest:ComputeManager.revert_resize>compute_rpc.finish_revert_resize#1"


def test_a_missing_or_foreign_patch_is_one_line(tmp_path):
    proc = cli("prove", str(tmp_path / "none.patch"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "does not exist" in proc.stderr
    bad = tmp_path / "bad.patch"
    bad.write_text("--- a/nova/no_such_file.py\n+++ b/nova/no_such_file.py\n@@ -1 +1 @@\n-x\n+y\n")
    proc = cli("prove", str(bad), "--scenario", "pinned-only")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "does not apply" in proc.stderr


def test_the_revert_gap_fix_is_proven_and_its_test_flips(tmp_path):
    proc = cli("prove", os.path.join(FIXES, "revert-gap-source.patch"),
               "--fixed", "revert-gap-source", "--scenario", "pinned-only",
               "--window", "lifecycle", "--ending", "revert", "--point", POINT,
               "--target", "source", "--jobs", "1", "--out", str(tmp_path),
               "--recreate", RECREATE,
               "--test", FIXED, timeout=1200)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-2000:]
    assert "revert-gap-source       1      0" in out, out[-3000:]
    recreate, fixed = out.split("test /")[1:3]
    assert "before: 1 tests, 0 failures" in recreate and "after:  1 tests, 1 failures" in recreate
    assert "before: 1 tests, 1 failures" in fixed and "after:  1 tests, 0 failures" in fixed
    assert "proven: revert-gap-source; nothing new bites" in out


def test_the_verdict_names_what_keeps_a_patch_from_being_proven():
    from harness.upstream.prove import Side, table, verdict
    before = Side(1, {"gap": ["a", "b"], "other": ["c"]}, {"gap": 2}, ["x"], 5)
    fixed = Side(0, {"other": ["c"]}, {"gap": 2}, ["x"], 5)
    assert verdict(before, fixed, ["gap"]) == []
    assert "gap              2      0  (2)  <- fixed" in "\n".join(table(before, fixed, ["gap"]))
    still = Side(1, {"gap": ["b"]}, {"gap": 2}, ["x", "y"], 5)
    assert verdict(before, still, ["gap"]) == [
        "gap still bites after the patch in 1 items, e.g. b",
        "1 items fail after the patch and not before, e.g. y"]
    assert verdict(before, fixed, ["other-gap"]) == []
    # a cause the patch does not target, biting where it did not: unmasked, not proven
    unmasked = Side(0, {"other": ["c"], "errored": ["d"]}, {"gap": 2}, ["x"], 5)
    assert verdict(before, unmasked, ["gap"]) == [
        "errored bites in more items after the patch (0 -> 1), e.g. d"]


def test_a_target_is_unshown_only_if_no_scenario_saw_it_bite():
    """A cause of one operation has no item in another scenario's campaign: that is
    no reason to call the proof short, unless no scenario saw it bite."""
    from harness.upstream.prove import Side, unshown
    bites = Side(1, {"gap": ["a"]}, {"gap": 1}, [], 3)
    elsewhere = Side(0, {}, {}, [], 3)
    assert unshown([elsewhere, bites], ["gap"]) == []
    assert unshown([elsewhere, bites], ["gap", "other-gap"]) == [
        "other-gap bit nowhere before the patch: this campaign cannot show it fixed"]


def test_only_more_failing_nova_tests_count_against_a_patch():
    from harness.upstream.nova_tests import bad
    assert bad("71 tests, 1 failures, 2 errors, 1 skip reasons") == 3
    assert bad("Traceback: no summary") > 10 ** 5  # a run that did not finish is the worst


def test_a_stuck_test_run_is_said_and_counts_as_failing():
    from harness.upstream import nova_tests
    code, summary = nova_tests.run(["nova.tests.unit.compute.test_resource_tracker"],
                                   timeout=0.5)
    assert code == 124 and summary.startswith("stuck: no result in 0.5 s"), summary
    assert nova_tests.bad(summary) > 0


def test_a_test_run_killed_from_outside_is_said_and_counts_as_failing(monkeypatch):
    """Its last line is a progress dot, not a summary (measured: an area run that stalled
    in eventlet's hub, killed by hand, printed '.' as its result)."""
    import sys
    from harness.upstream import nova_tests
    monkeypatch.setattr(nova_tests, "command", lambda modules, select: [
        sys.executable, "-c", "import os, signal; print('.', flush=True); "
        "os.kill(os.getpid(), signal.SIGTERM)"])
    code, summary = nova_tests.run(["nova.tests.unit.compute.test_resource_tracker"])
    assert code < 0 and summary == "killed by signal 15: no result", summary
    assert nova_tests.bad(summary) > 0


def test_a_patch_names_the_causes_it_fixes(tmp_path):
    """``Fixes:`` lines before the diff: prove's default --fixed, and the bug texts'
    candidate fix (a patch by the cause's name still counts)."""
    from harness.upstream import prove
    fixes = tmp_path / "fixes"
    fixes.mkdir()
    (fixes / "both.patch").write_text("Fail what a restart interrupted.\n\nFixes: a, b\n"
                                      "Fixes: c\n--- a/nova/x.py\n+++ b/nova/x.py\n"
                                      "Fixes: not-a-header\n")
    (fixes / "d.patch").write_text("--- a/nova/x.py\n+++ b/nova/x.py\n")
    assert prove.fixes(str(fixes / "both.patch")) == ["a", "b", "c"]
    assert prove.fixes(str(fixes / "d.patch")) == []
    assert [prove.fix_for(str(fixes), c) for c in ("a", "c", "d", "e")] == [
        "fixes/both.patch", "fixes/both.patch", "fixes/d.patch", None]
