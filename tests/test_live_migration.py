"""Live migration as a swept operation: the 1845146 and 1849165 mutations are
caught where their mechanisms predict and nowhere else, and clean Nova passes
there (or shows exactly its reviewed known finding).

The bug's window, read from Nova (see harness.cloud.mutations.Bug1845146):
from the destination's claim in ``check_can_live_migrate_destination``
until the source's ``live_migration`` saves the migration as 'queued'. A
destination periodic inside it drops the claim; before it there is no
claim to drop, after it the migration counts again. Three points, one
target, one ending keep CI short (the full sweep is in the closing note).
"""
from tests.conftest import cli, sweep

#: point -> caught by the mutation
SAMPLE = {
    "dest:ComputeManager.check_can_live_migrate_destination>driver.check_can_live_migrate_destination#1": False,  # noqa: E501 - before the claim
    "dest:ComputeManager.check_can_live_migrate_destination>driver.cleanup_live_migration_destination_check#1": True,  # noqa: E501 - claimed, 'accepted'
    "source:ComputeManager._set_migration_status>Migration.save#2": False,  # 'queued' saved
}


def _sweep(tmp_path, *extra):
    return sweep(tmp_path, "live-migration", SAMPLE, "--window", "lifecycle", "--target", "dest",
                 "--ending", "success", *extra)


def test_1845146_caught_exactly_while_the_migration_is_accepted(tmp_path):
    clean = _sweep(tmp_path)
    assert {p: i["verdict"] for p, i in clean.items()} == {p: "pass" for p in SAMPLE}
    mutated = _sweep(tmp_path, "--mutate", "1845146")
    assert {p: i["verdict"] for p, i in mutated.items()} == {
        p: "fail" if caught else "pass" for p, caught in SAMPLE.items()}
    (caught,) = [i for p, i in mutated.items() if SAMPLE[p]]
    # the destination's RT lost the guest it still runs: ground truth says so in flight
    assert any(f["checkpoint"] == "in-flight" and f["check"] == "truth"
               and f["where"].startswith("host-b") for f in caught["findings"]), caught["findings"]


def test_an_ending_nova_breaks_is_a_failure_with_its_aftermath_checked(tmp_path):
    """The rollback of a migration whose claim 1845146 dropped: Nova cannot unpin
    and the server goes to ERROR; the item still reaches after-rollback and
    after-delete and fails with what Nova left, as a resize ending does."""
    (point,) = [p for p, caught in SAMPLE.items() if caught]
    (item,) = sweep(tmp_path, "live-migration", [point], "--window", "lifecycle", "--target",
                    "dest", "--ending", "rollback", "--mutate", "1845146").values()
    assert item["verdict"] == "fail", item["problems"]
    seen = {(f["checkpoint"], f["check"], f["where"]): f["seen"] for f in item["findings"]}
    assert "CPU set to unpin [6, 7]" in seen[("after-rollback", "liveness", "rollback of vm1")]
    assert seen[("after-rollback", "liveness", "server vm1 status")] == "'ERROR'"
    assert not [f for f in item["findings"] if f["checkpoint"] == "after-delete"]


#: rollback: point -> caught by the 1849165 mutation (see harness.cloud.mutations.Bug1849165)
ROLLBACK = {
    "source:ComputeManager._rollback_live_migration>Instance.drop_migration_context#1": False,  # noqa: E501 - context still there
    "source:ComputeManager._rollback_live_migration>Instance.save#1": True,  # context gone, still MIGRATING
    "source:ComputeManager._notify_about_instance_usage>notify_usage.live_migration._rollback.end#1": False,  # noqa: E501 - saved: no longer MIGRATING
}


def test_1849165_caught_exactly_where_the_context_is_gone_and_the_move_goes_on(tmp_path):
    def run(*extra):
        return sweep(tmp_path, "live-migration", ROLLBACK, "--window", "lifecycle",
                     "--target", "dest", "--ending", "rollback", *extra)
    clean = {p: i["verdict"] for p, i in run().items()}
    # the two known rollback findings (1894095's re-claim, its legacy-counter tail) bracket it
    assert clean == {p: "pass" if p.startswith("source:ComputeManager._notify") else "known"
                     for p in ROLLBACK}
    mutated = run("--mutate", "1849165")
    assert {p: i["verdict"] for p, i in mutated.items()} == {
        p: "fail" if caught else clean[p] for p, caught in ROLLBACK.items()}
    (caught,) = [i for p, i in mutated.items() if ROLLBACK[p]]
    # the destination's periodic failed (logged only), right after the injection
    assert any(f["check"] == "logs" and "TypeError: argument of type 'NoneType'" in f["seen"]
               and f["checkpoint"].startswith("after-injection@host-b")
               for f in caught["findings"]), caught["findings"]


def test_the_mutations_are_listed_with_their_bugs():
    proc = cli("mutations")
    assert proc.returncode == 0, proc.stderr
    for name in ("1944759", "1845146", "1849165"):
        assert f"https://bugs.launchpad.net/nova/+bug/{name}" in proc.stdout
