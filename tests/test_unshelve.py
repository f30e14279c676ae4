"""Unshelve as a swept operation: the 2025480 mutation is caught where its mechanism
predicts and nowhere else, and clean Nova passes there.

The bug's window, read from Nova (see harness.cloud.mutations.Bug2025480):
from the destination's ``instance_claim`` in ``_unshelve_instance`` (the
instance still SHELVED_OFFLOADED, now SPAWNING on its new host) until the
save to ACTIVE. A destination periodic inside it drops the claim; the loss
shows right after the unshelve, before any other periodic. Measured over
the whole lifecycle window (41 points): caught at the 28 from the claim
through the save, nowhere else; three of them keep CI short.
"""
from tests.conftest import cli, sweep

#: point -> caught by the mutation
SAMPLE = {
    "dest:ComputeManager._unshelve_instance>lock.compute_resources#1": False,  # before the claim
    "dest:ComputeManager._unshelve_instance>driver.spawn#1": True,             # claimed, spawning
    "dest:SchedulerQueryClient.update_instance_info>scheduler_rpc.update_instance_info#1": False,
}


def _sweep(tmp_path, *extra):
    return sweep(tmp_path, "unshelve", SAMPLE, *extra)


def test_2025480_caught_exactly_while_the_unshelve_spawns(tmp_path):
    clean = _sweep(tmp_path)
    assert {p: i["verdict"] for p, i in clean.items()} == {p: "pass" for p in SAMPLE}
    mutated = _sweep(tmp_path, "--mutate", "2025480")
    assert {p: i["verdict"] for p, i in mutated.items()} == {
        p: "fail" if caught else "pass" for p, caught in SAMPLE.items()}
    (caught,) = [i for p, i in mutated.items() if SAMPLE[p]]
    # the destination's RT lost the guest it runs, right after the unshelve
    assert any(f["checkpoint"] == "after-unshelve" and f["check"] == "rt"
               and f["where"].startswith("host-b pinned") for f in caught["findings"]), \
        caught["findings"]


def test_an_unshelve_has_only_its_destination_to_inject_on(tmp_path):
    proc = cli("run", "unshelve", "--target", "source", "--list")
    assert proc.returncode == 2 and "unknown target for unshelve 'source'; valid: dest" in proc.stderr
