"""Known findings are root causes: a condition on Nova's state and an effect on the ledger.

Every check here runs real Nova. A harmless extra call inside a cause's
window (mutation ``selftest-extra-read``) is judged as the same cause, not a
new finding; a cause that held and bit nowhere is said once, by name, and
fails the run unless ``--fixed`` names it; a cause said fixed that still
bites fails the items where it does.
"""
import json

import pytest

from harness.errors import InvalidScenario
from harness.oracles import causes
from tests.conftest import cli

#: the extra read selftest-extra-read adds, and the call after it (both inside the window
#: where the destination's periodic counts the old flavor)
EXTRA = "dest:ComputeManager._finish_resize>BlockDeviceMappingList.get_by_instance_uuid#1"
NEXT = "dest:ComputeManager._finish_resize>network.setup_networks_on_host#1"
#: after finish_resize's first save: no cause's condition holds, nothing is found
LATER = "dest:ComputeManager._finish_resize>Migration.save#1"
CAUSE = "dest-counts-old-flavor"

PHANTOM = """
[[cause]]
name = "phantom"
class = "transient"
title = "a cause whose condition holds after finish_resize's save, where nothing is wrong"
when = { runs_on = "dest", "instance.task_state" = "resize_finish" }
effect = [{ at = "after-*", host = "dest", counts = "old" }]
"""


def _run(tmp_path, *args, env=None):
    out = tmp_path / "r.json"
    proc = cli("run", "pinned-hugepages", "--target", "dest", "--ending", "revert",
               "--jobs", "2", "--json", str(out), *args, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    data = json.loads(out.read_text()) if out.exists() else None
    return proc, data


def test_a_harmless_extra_call_in_a_window_is_the_same_cause(tmp_path):
    proc, data = _run(tmp_path, "--mutate", "selftest-extra-read", "--point", EXTRA,
                      "--point", NEXT)
    assert proc.returncode == 0, proc.stdout[-3000:]
    verdicts = {i["id"].split("/")[1]: (i["verdict"], i["causes"]["bit"]) for i in data["items"]}
    assert verdicts == {EXTRA: ("known", [CAUSE]), NEXT: ("known", [CAUSE])}
    assert all(f["cause"] == CAUSE for i in data["items"] for f in i["findings"])
    assert f"{CAUSE} (transient): bit in 2 items (held in 2): pinned-hugepages 2" in proc.stdout
    assert data["meta"]["causes"][CAUSE]["window"]["pinned-hugepages/resize"]["calls"] == 2
    # without the cause, the same findings are new: the cause is what explains them
    empty = tmp_path / "none.toml"
    empty.write_text("")
    proc, data = _run(tmp_path, "--mutate", "selftest-extra-read", "--point", EXTRA,
                      env={"NOVA_CHAOS_CAUSES": str(empty)})
    assert proc.returncode == 1 and [i["verdict"] for i in data["items"]] == ["fail"]


def test_a_cause_that_bites_nowhere_is_said_once_and_fixed_turns_it_around(tmp_path):
    path = tmp_path / "causes.toml"
    path.write_text(open(causes.CAUSES_FILE).read() + PHANTOM)
    env = {"NOVA_CHAOS_CAUSES": str(path)}
    proc, data = _run(tmp_path, "--point", LATER, "--point", NEXT, env=env)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert sorted(i["verdict"] for i in data["items"]) == ["known", "pass"]
    assert "root cause phantom: no longer reproduces in 1 items where its condition held" in proc.stdout
    proc, data = _run(tmp_path, "--point", LATER, "--fixed", "phantom", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "root cause phantom: fixed, as --fixed says in 1 items" in proc.stdout
    # said fixed, still biting: its items fail, and so does the run
    proc, data = _run(tmp_path, "--point", NEXT, "--fixed", CAUSE, env=env)
    assert proc.returncode == 1
    (item,) = data["items"]
    assert item["verdict"] == "fail"
    assert f"root cause {CAUSE}, said fixed (--fixed), still bites here" in json.dumps(item)


def test_an_unknown_fixed_cause_is_one_line(tmp_path):
    proc = cli("run", "pinned-hugepages", "--fixed", "no-such-cause", "--list")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("nova-chaos: error: unknown root cause")


@pytest.mark.parametrize("body, complaint", [
    ('name = "x"\nclass = "hard"\ntitle = "t"\n', "missing ['when']"),
    ('name = "x"\nclass = "bad"\ntitle = "t"\nwhen = { runs_on = "dest" }\n', "class must be"),
    ('name = "x"\nclass = "hard"\ntitle = "t"\nwhen = { runs_on = "dest" }\n', "needs an effect"),
    ('name = "x"\nclass = "hard"\ntitle = "t"\nwhen = { runs_on = "dest" }\n'
     'effect = [{ at = "*", host = "dest", lacks = "old", counts = "new" }]\n', "lacks or counts"),
    ('name = "x"\nclass = "transient"\ntitle = "t"\nwhen = { runs_on = "dest" }\n'
     'effect = [{ at = "*", host = "dest", lacks = "old", cells = "old" }]\n', "counters only"),
])
def test_a_malformed_cause_is_one_line(tmp_path, body, complaint):
    path = tmp_path / "causes.toml"
    path.write_text("[[cause]]\n" + body)
    with pytest.raises(InvalidScenario, match="causes.toml: cause\\[0\\]") as info:
        causes.load(str(path))
    assert complaint in str(info.value)
