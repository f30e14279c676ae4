"""A pass is proof, end to end: Nova broken on purpose, in fork and in fresh mode.

The verdict rules themselves are in tests/test_judge.py; here real runs
must reach them, in every mode, with a report written and no traceback.
"""
import json

from tests.conftest import cli

#: harness.execute.forking.HOLD_ENV (not imported: it loads eventlet into the xdist worker)
HOLD_ENV = "NOVA_CHAOS_SELFTEST_HOLD"

#: inside the card's window; its injected periodic runs before the ending
POINT = "source:ComputeManager._resize_instance>compute_rpc.finish_resize#1"
AFTER = "dest:ComputeManager._finish_resize>Migration.save#1"


def _verdicts(tmp_path, name, *args, env=None):
    report = tmp_path / f"{name}.json"
    proc = cli("run", "pinned-hugepages", "--json", str(report), *args, env=env)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    data = json.loads(report.read_text())
    return proc, {i["id"]: (i["verdict"], [(p["kind"], p["text"]) for p in i["problems"]])
                  for i in data["items"]}, data["meta"]


def test_a_server_vanishing_mid_confirm_is_an_error_in_every_mode(tmp_path):
    args = ["--mutate", "selftest-vanish", "--point", POINT, "--target", "dest",
            "--ending", "confirm", "--ending", "revert", "--jobs", "2"]
    results = {}
    for mode in ("fork", "fresh"):
        proc, results[mode], _ = _verdicts(tmp_path, mode, "--mode", mode, *args)
        assert proc.returncode == 1
    assert results["fork"] == results["fresh"]
    by_ending = {i.split("/")[3]: v for i, v in results["fork"].items()}
    verdict, problems = by_ending["confirm"]
    assert verdict == "error"
    assert problems[0] == ("error", "error: stopped at confirm vm1: "
                           "OpenStackApiNotFoundException: Item not found")
    assert problems[1] == ("error", "error: never reached checkpoint after-confirm, after-delete")
    assert by_ending["revert"][0] in ("pass", "known")  # the sabotage hits confirm only
    item = next(i for i in results["fork"] if "/confirm/" in i)
    replay = cli("replay", item)
    assert replay.returncode == 1
    assert "Traceback" not in replay.stdout + replay.stderr
    assert "verdict: error" in replay.stdout


def test_a_fork_parent_held_far_longer_than_its_items_gives_the_same_verdicts(tmp_path):
    """Held 20 s at its first branch (ten times an item) with RPC calls in flight:
    the same verdicts as unheld: no deadline of Nova's follows the wall clock."""
    args = ["--point", POINT, "--point", AFTER, "--target", "source", "--ending", "confirm",
            "--jobs", "1"]
    _, free, _ = _verdicts(tmp_path, "free", *args)
    _, held, meta = _verdicts(tmp_path, "held", *args, env={HOLD_ENV: "20"})
    assert meta["seconds"] > 20
    assert held == free
    assert [v for v, _ in held.values()] == ["pass", "pass"]
    assert all(p["passed"] and p["trace_matches"] for p in meta["fork_parents"])


#: inside migrate_disk_and_power_off, which holds the instance directory's path
#: (computed before power_off) across the point
INSIDE_POWER_OFF = "source:LibvirtDriver._destroy._wait_for_destroy>driver.get_info#1"


def test_children_forked_where_nova_holds_a_path_have_their_own_files(tmp_path):
    """Every process of a fork tree sees its own instance files at the same path.

    With a private path in CONF only, the second child forked here renamed the
    parent's instance directory from under it (FileNotFoundError), and its
    result was filed under an ending it never chose ("a forked child wrote
    no result").
    """
    proc, verdicts, meta = _verdicts(tmp_path, "files", "--point", INSIDE_POWER_OFF,
                                     "--target", "source", "--target", "dest",
                                     "--ending", "revert", "--jobs", "2")
    assert len(verdicts) == 2
    assert all(v in ("pass", "known") for v, _ in verdicts.values()), verdicts
    assert all(p["passed"] and p["trace_matches"] for p in meta["fork_parents"])

