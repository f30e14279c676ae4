"""Scenario files are validated eagerly, with one line naming the file and field."""
import copy
import tomllib

import pytest

from harness import scenario
from harness.errors import InvalidScenario, UsageError

with open(scenario.available()["pinned-hugepages"], "rb") as fh:
    BASE = tomllib.load(fh)


def load_with(mutate):
    raw = copy.deepcopy(BASE)
    mutate(raw)
    return scenario.from_dict(raw, "bad.toml")


def test_every_scenario_loads():
    for name in scenario.available():
        s = scenario.load(name)
        assert s.boots and s.moves and s.subject.server in {b.server for b in s.boots}


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r["flavors"]["large"].update(vcpus=40),
     "bad.toml: flavors.large: cannot fit any host"),
    (lambda r: r["steps"][0].update(host="host-z"), "unknown host in bad.toml: steps[0] 'host-z'"),
    (lambda r: r["steps"][1].update(flavor="huge"), "unknown flavor in bad.toml: steps[1] 'huge'"),
    (lambda r: r["steps"][1].update(op="shelve"), "unknown op in bad.toml: steps[1] 'shelve'"),
    (lambda r: r.update(endings=["confirm", "shelve"]), "unknown ending in bad.toml 'shelve'"),
    (lambda r: r["hosts"].pop(), "a move needs two [[hosts]], or one with"),
    (lambda r: r["steps"].pop(), "at least one boot then a move"),
    (lambda r: r["steps"].append(dict(r["steps"][1])), "server 'vm1' is moved twice"),
    (lambda r: r["steps"].append(dict(r["steps"][0], server="vm9")),
     "boot steps come before the moves"),
    (lambda r: r["flavors"]["small"]["extra_specs"].update({"hw:cpu_policy": "mixed"}),
     "hw:cpu_policy=mixed needs hw:cpu_dedicated_mask"),
    (lambda r: r["cloud"].update(allow_resize_to_same_host="yes"),
     "allow_resize_to_same_host must be true or false"),
    (lambda r: r["hosts"][1].update(cells=0), "hosts[1] 'host-b': 'cells' must be an integer >= 1"),
    (lambda r: r["flavors"]["small"].update(extra_specs={"hw:mem_page_size": "3"}),
     "hw:mem_page_size must be a size in KiB"),
    (lambda r: r.update(colour=1), "unknown key(s) ['colour']"),
    (lambda r: r.update(steps=[r["steps"][0], dict(r["steps"][0], server="vm2"), r["steps"][1],
                               {"op": "live-migrate", "server": "vm2", "host": "host-b"}]),
     "the moves are of one operation, not live-migration and resize"),
])
def test_bad_scenarios(mutate, message):
    with pytest.raises(UsageError) as exc:
        load_with(mutate)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_unknown_scenario_lists_the_valid_ones():
    with pytest.raises(UsageError, match="unknown scenario 'nope'; valid: .*pinned-hugepages"):
        scenario.load("nope")


def test_bad_toml_names_the_file(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("name = [")
    with pytest.raises(InvalidScenario, match="broken.toml: not valid TOML"):
        scenario.load(str(path))


def test_bad_known_findings_file_is_one_line(tmp_path):
    from harness.oracles import known
    path = tmp_path / "known.toml"
    path.write_text('[[finding]]\nwhere = "a\\\'b"\n')
    with pytest.raises(InvalidScenario, match="known.toml: not valid TOML") as exc:
        known.load(str(path))
    assert "\n" not in str(exc.value)


def test_known_findings_cover_their_scenarios():
    from harness.oracles import known
    names = set(scenario.available())
    for entry in known.load():
        assert all(any(__import__("fnmatch").fnmatch(n, g) for n in names) for g in entry.scenarios)


ENTRY = """
[[finding]]
scenario = "pinned-hugepages"
window = "lifecycle"
points = [{points}]
targets = ["both"]
endings = ["revert"]
expect = [{{ checkpoint = "after-revert", check = "rt", where = "host-a pinned pCPUs", seen = "0" }}]
class = "hard"
reason = "reviewed"
"""


def test_a_named_point_set_is_written_once_and_expanded_where_named(tmp_path):
    from harness.oracles import known
    path = tmp_path / "known.toml"
    path.write_text('[point_sets]\ngap = ["dest:a#1", "source:b#1"]\n'
                    + ENTRY.format(points='"dest:x#1", "@gap"'))
    [entry] = known.load(str(path))
    assert entry.points == ("dest:x#1", "dest:a#1", "source:b#1")


def test_an_unknown_point_set_is_one_line_naming_it(tmp_path):
    from harness.oracles import known
    path = tmp_path / "known.toml"
    path.write_text('[point_sets]\ngap = ["dest:a#1"]\n' + ENTRY.format(points='"@gaps"'))
    with pytest.raises(InvalidScenario, match=r"finding\[0\]: unknown point set '@gaps'; defined: @gap"):
        known.load(str(path))


def test_an_expectation_without_the_value_it_saw_is_one_line(tmp_path):
    from harness.oracles import known
    path = tmp_path / "known.toml"
    path.write_text(ENTRY.format(points='"dest:x#1"').replace(', seen = "0"', ""))
    with pytest.raises(InvalidScenario, match=r"finding\[0\]: each expect needs exactly "
                       r"\['check', 'checkpoint', 'seen', 'where'\]"):
        known.load(str(path))


def _finding(check, where, expected, seen):
    from harness.oracles.checks import Finding
    return Finding(check, where, expected, seen)


def test_an_entry_matches_values_not_only_places(tmp_path):
    from harness.execute.item import Item
    from harness.oracles import known
    path = tmp_path / "known.toml"
    path.write_text(ENTRY.format(points='"dest:x#1"').replace(
        'checkpoint = "after-revert"', 'checkpoint = "after-*"'))
    [entry] = known.load(str(path))
    assert entry.covering("after-revert", _finding("rt", "host-a pinned pCPUs", 2, 0)) == 0
    assert entry.covering("after-revert", _finding("rt", "host-a pinned pCPUs", 2, 1)) is None
    # "back to zero" after the delete is never absorbed by a glob: it must be named
    assert entry.covering("after-delete", _finding("rt", "host-a pinned pCPUs", 2, 0)) is None
    item = Item("pinned-hugepages", "dest:x#1", "both", "revert", window="lifecycle")
    assert entry.applies(item)


def test_the_value_of_a_log_finding_is_the_exception_it_names():
    from harness.oracles import known
    logs = _finding("logs", "log lines matching 'Error updating'", [], [
        "2026-11-30 17:48:30,248 ERROR [nova.compute.manager] Error updating resources for node "
        "host-b. <- CPUPinningUnknown: CPU set to pin [5, 6] must be a subset of known CPU set"])
    assert known.value_of(logs) == "CPUPinningUnknown"
    moved = _finding("convergence", "periodic changed rt host-b vcpus_used", 2, 4)
    assert known.value_of(moved) == "2 -> 4"
    assert known.value_of(_finding("rt", "host-a hugepages used", {}, {2048: 512})) == "{2048: 512}"
    # what the convergence periodic logged is a log finding too: its times are not its value
    logged = _finding("convergence", "log lines matching 'Error updating'", [], logs.seen)
    assert known.value_of(logged) == "CPUPinningUnknown"


LIVE = scenario.available()["live-migration"]


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r["steps"].append({"op": "live-migrate", "server": "vm2", "host": "host-a"}),
     "a live migration is the only move of its scenario"),
    (lambda r: r.update(endings=["confirm"]), "unknown ending in bad.toml 'confirm'; valid: rollback, success"),
    (lambda r: r.update(hosts=r["hosts"][:1], cloud=dict(r["cloud"], allow_resize_to_same_host=True),
                        steps=[r["steps"][0], {"op": "live-migrate", "server": "vm1"}]),
     "a live migration needs two [[hosts]]"),
])
def test_bad_live_migration_scenarios(mutate, message):
    with open(LIVE, "rb") as fh:
        raw = tomllib.load(fh)
    mutate(raw)
    with pytest.raises(UsageError) as exc:
        scenario.from_dict(raw, "bad.toml")
    assert message in str(exc.value)


def test_a_live_migration_scenario_has_its_own_endings():
    live = scenario.load("live-migration")
    assert live.operation.name == "live-migration" and live.endings == ("success", "rollback")
