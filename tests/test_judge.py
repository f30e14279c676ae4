"""A pass is proof: the verdict rules, each broken on purpose on a hand-made run.

No Nova here: ``campaign.judge`` reads only what a finished run left behind,
so every way a run can fall short is built directly and must not pass.
"""
import types

from harness.execute import campaign, discovery, runner
from harness.execute.item import Item
from harness.execute.record import Problem
from harness.explore import injection
from harness.operations import RESIZE
from harness.oracles.checks import Finding

ITEM = Item("pinned-hugepages", "source:X.y>Instance.save#1", "both", "confirm")
TRACE = ["source:X.y>Instance.get_by_uuid#1", "source:X.y>Instance.save#1", "dest:Z.w>notify#1"]
HOSTS = ["host-a", "host-b"]


def finished(checkpoints, error=None, trace=TRACE, fired=HOSTS):
    """A run as the runner leaves it: its result, trace and injection."""
    result = runner.RunResult("pinned-hugepages", "confirm",
                              [runner.Checkpoint(n, []) for n in checkpoints], error=error,
                              stopped_at="confirm vm1" if error else None)
    run = runner.Run.__new__(runner.Run)
    run.ending, run.result, run.where = "confirm", result, "delete vm1"
    run.operation = RESIZE
    run.tracer = types.SimpleNamespace(points=[types.SimpleNamespace(id=p) for p in trace])
    inj = injection.Injection(ITEM.point, ITEM.target, hosts=list(HOSTS),
                              fired_at=[f"{h} (now)" for h in fired])
    return campaign.judge(ITEM, run, inj, {"confirm": TRACE}, [], 0.0)


EVERY = ["after-boot", "after-injection@host-a", "after-injection@host-b", "verify-resize",
         "after-confirm", "after-delete"]


def test_a_run_through_every_checkpoint_passes():
    assert finished(EVERY).verdict == "pass"


def test_a_run_that_stopped_is_an_error_whatever_it_reached():
    out = finished(EVERY[:4], error="OpenStackApiNotFoundException: Item not found")
    assert out.verdict == "error"
    assert [p.kind for p in out.problems] == ["error", "error"]
    assert out.problems[0].text == ("error: stopped at confirm vm1: "
                                    "OpenStackApiNotFoundException: Item not found")
    assert "never reached checkpoint after-confirm, after-delete" in out.problems[1].text


def test_a_missing_checkpoint_is_an_error_even_without_an_exception():
    out = finished([n for n in EVERY if n != "after-delete"])
    assert out.verdict == "error"
    assert out.problems == [Problem("error", "error: never reached checkpoint after-delete "
                                             "(the run ended at delete vm1)")]


def test_target_both_needs_both_periodics():
    out = finished([n for n in EVERY if n != "after-injection@host-b"], fired=["host-a"])
    assert out.verdict == "fail"
    assert out.problems == [Problem("missed-injection", "injection did not fire on host-b: its "
                                    "periodic was deferred to a lock release that never came")]


def test_a_point_never_reached_fails():
    out = finished([n for n in EVERY if "injection" not in n], fired=[])
    assert out.verdict == "fail"
    assert out.problems[0].kind == "missed-injection"
    assert out.problems[0].text.startswith("injection did not fire: point")


def test_a_trace_off_the_recorded_one_is_an_error():
    out = finished(EVERY, trace=[TRACE[0], "source:X.y>Flavor.get#1", *TRACE[1:]])
    assert out.verdict == "error"
    assert out.problems[0].kind == "diverged-trace"
    assert "nondeterministic trace" in out.problems[0].text


def test_a_finding_no_entry_covers_fails():
    result = finished(EVERY)
    result.checkpoints[-1].findings.append(Finding("rt", "host-a pinned pCPUs", 2, 0))
    verdict, problems, _, _ = campaign._verdict(ITEM, result.checkpoints, [], [])
    assert verdict == "fail" and problems[0].kind == "finding"
    assert problems[0].text.startswith("hard finding at after-delete")


def test_discovery_is_keyed_on_every_module_of_the_tree(tmp_path):
    deep = tmp_path / "nova" / "virt" / "libvirt"
    deep.mkdir(parents=True)
    (deep / "driver.py").write_text("X = 1\n")
    (tmp_path / "nova" / "__init__.py").write_text("")
    before = discovery._tree_digest(str(tmp_path / "nova"))
    (deep / "driver.py").write_text("X = 2\n")
    discovery._tree_digest.cache_clear()
    assert discovery._tree_digest(str(tmp_path / "nova")) != before


def test_a_split_item_whose_periodic_never_stopped_inside_itself_proves_nothing_of_depth_two():
    import dataclasses
    split_item = dataclasses.replace(ITEM, fault="split")
    result = runner.RunResult("pinned-hugepages", "confirm", [runner.Checkpoint(n, []) for n in EVERY])
    run = runner.Run.__new__(runner.Run)
    run.ending, run.result, run.where, run.operation = "confirm", result, "delete vm1", RESIZE
    run.tracer = types.SimpleNamespace(points=[types.SimpleNamespace(id=p) for p in TRACE])
    fired = ["host-a (now, split: resumed at dest:Z.w>notify#1)",
             "host-b (now, never stopped inside)"]
    inj = injection.Injection(split_item.point, "both", "split", hosts=list(HOSTS), fired_at=fired)
    out = campaign.judge(split_item, run, inj, {"confirm": TRACE}, [], 0.0)
    assert out.verdict == "fail"
    assert out.problems == [Problem("missed-injection", "the split periodic never stopped between "
                                    "its reads: host-b (now, never stopped inside)")]
    inj.fired_at = fired[:1] + ["host-b (now, split: resumed at checkpoint verify-resize)"]
    assert campaign.judge(split_item, run, inj, {"confirm": TRACE}, [], 0.0).verdict == "pass"


def test_a_killed_host_plans_its_recovery_instead_of_the_ending():
    """A restart item must reach after-restart and after-delete (not the ending's
    checkpoints, which no run after a kill has); short of them it is an error."""
    from harness.explore import restart
    item = Item("pinned-hugepages", "source:X.y>Instance.save#1", "source", "confirm",
                fault="restart")

    def killed(checkpoints):
        result = runner.RunResult("pinned-hugepages", "confirm",
                                  [runner.Checkpoint(n, []) for n in checkpoints])
        run = runner.Run.__new__(runner.Run)
        run.ending, run.result, run.where = "confirm", result, "delete vm1"
        run.operation, run.recovery = RESIZE, list(restart.PLANNED)
        run.tracer = types.SimpleNamespace(points=[types.SimpleNamespace(id=p) for p in TRACE])
        inj = injection.Injection(item.point, item.target, "restart", hosts=["host-a"],
                                  fired_at=["host-a (killed, restarted)"])
        return campaign.judge(item, run, inj, {"confirm": TRACE}, [], 0.0)

    assert killed(["after-boot", "after-restart", "after-delete"]).verdict == "pass"
    short = killed(["after-boot", "after-restart"])
    assert short.verdict == "error"
    assert "never reached checkpoint after-delete" in short.problems[0].text
