"""Evacuate as a swept operation: the source fenced and down, the rebuild elsewhere, the source back.

The 1791075 window, read from Nova (harness.cloud.mutations.Bug1791075):
the destination's claim (``rebuild_claim``) through the rebuild's save to
task_state None; a destination periodic there counts the evacuation's
migration only because rebuild task states are "resizing". Measured over
both windows (83 items): the mutation is caught at the 42 points from the
claim through that save and nowhere else (the five after it are the
root causes clean Nova has there, see scenarios/root-causes.toml).
"""
import tomllib

import pytest

from harness import scenario
from harness.errors import InvalidScenario
from tests.conftest import sweep

#: point -> caught by the mutation
SAMPLE = {
    "dest:ComputeManager._do_rebuild_instance_with_claim>lock.compute_resources#1": False,  # before
    "dest:ComputeManager._rebuild_default_impl>driver.spawn#1": True,      # claimed, spawning
    "dest:ComputeManager._do_rebuild_instance>Instance.save#2": True,      # the last one caught
    "dest:ResourceTracker.finish_evacuation>Instance.save#1": False,       # under the lock: after
}


def test_1791075_caught_exactly_from_the_claim_to_the_rebuild_save(tmp_path):
    clean = sweep(tmp_path, "evacuate", SAMPLE)
    assert {p: i["verdict"] for p, i in clean.items()} == {p: "pass" for p in SAMPLE}
    mutated = sweep(tmp_path, "evacuate", SAMPLE, "--mutate", "1791075")
    assert {p: i["verdict"] for p, i in mutated.items()} == {
        p: "fail" if caught else "pass" for p, caught in SAMPLE.items()}
    for point, caught in SAMPLE.items():
        if caught:  # the destination's RT lost the guest it runs, before any other periodic
            assert any(f["checkpoint"] == "evacuated" and f["check"] == "rt"
                       and f["where"] == "host-b pinned pCPUs" and f["seen"] == "2"
                       for f in mutated[point]["findings"]), mutated[point]["findings"]


def test_the_source_restarting_is_swept_in_fork_mode(tmp_path):
    """The old service's stop runs its graceful shutdown on a thread of Nova's own
    (Nova 34): a fork parent there could not fork, and every item of the restart
    came out "a forked child wrote no result"."""
    point = "source:ComputeManager.cleanup_host>driver.cleanup_host#1"
    items = sweep(tmp_path, "evacuate", [point], "--window", "lifecycle")
    assert items[point]["verdict"] == "pass", items[point]["problems"]


def test_only_the_evacuated_server_may_be_on_the_fenced_host():
    with open(scenario.load("evacuate").path, "rb") as fh:
        data = tomllib.load(fh)
    data["steps"][1]["host"] = "host-a"  # the bystander beside the evacuated server
    with pytest.raises(InvalidScenario, match="only 'vm1' may be on host-a.*also there: vm2"):
        scenario.from_dict(data, "x.toml")


#: point -> caught by 1896463: finish_evacuation's steps run after its lock, not under it
SPLIT_SAMPLE = {
    "dest:ResourceTracker.finish_evacuation>Instance.save#1": True,   # before the host is set
    "dest:ResourceTracker.finish_evacuation>Instance.drop_migration_context#1": False,  # after
}


def test_1896463_caught_where_the_lock_was_whole_or_split(tmp_path):
    """Without the lock, a periodic before finish_evacuation's save is no longer
    deferred past it. Run whole there it meets the state of the known evacuate gap and
    does what that root cause says: the cause now bites at a call where, on clean Nova,
    it cannot (the lock defers the periodic past the save) -- the cause's window is one
    call wider, which is how a reintroduced 1896463 shows (issue 30). Stopped between
    its reads across the host's save and the context's drop (split:2), the bug's own
    interleaving, it is a new finding. Clean Nova passes both ways."""
    clean = sweep(tmp_path, "evacuate", SPLIT_SAMPLE, "--fault", "split:2")
    assert {p: i["verdict"] for p, i in clean.items()} == {p: "pass" for p in SPLIT_SAMPLE}
    whole = sweep(tmp_path, "evacuate", SPLIT_SAMPLE, "--mutate", "1896463")
    assert {p: (i["verdict"], i.get("causes", {}).get("bit", [])) for p, i in whole.items()} == {
        p: ("known", ["evacuate-gap-dest"]) if caught else ("pass", [])
        for p, caught in SPLIT_SAMPLE.items()}
    mutated = sweep(tmp_path, "evacuate", SPLIT_SAMPLE, "--fault", "split:2", "--mutate", "1896463")
    expected = {p: "fail" if caught else "pass" for p, caught in SPLIT_SAMPLE.items()}
    assert {p: i["verdict"] for p, i in mutated.items()} == expected
    for items in (whole, mutated):
        (caught,) = [i for p, i in items.items() if SPLIT_SAMPLE[p]]
        assert any(f["check"] == "truth" and f["seen"] == "[6, 7]" for f in caught["findings"])
    # where it stopped and where it finished, both named
    assert caught["id"].endswith("/fault=split:2/mutate=1896463")
    assert caught["fired"] == ["host-b (now, split: resumed at "
                               "dest:ResourceTracker.finish_evacuation>Migration.save#1)"]
