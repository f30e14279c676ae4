"""Live migration as a swept operation: the 1845146 mutation is caught where its
mechanism predicts and nowhere else, and clean Nova passes there.

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


def test_the_mutations_are_listed_with_their_bugs():
    proc = cli("mutations")
    assert proc.returncode == 0, proc.stderr
    for name in ("1944759", "1845146", "1849165"):
        assert f"https://bugs.launchpad.net/nova/+bug/{name}" in proc.stdout
