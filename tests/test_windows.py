"""The card's window is the lifecycle window's core: a run of both sweeps it once.

The one-id-per-call rule (campaign.as_narrower) is only sound if every
ending's lifecycle trace holds the card's trace as one run of the same
calls; the last test checks that on real Nova's recorded traces.
"""
import fnmatch

from harness import scenario
from harness.cloud import nova_support
from harness.execute import campaign, discovery
from harness.oracles import known
from harness.execute.item import Item
from harness.execute.record import Record

OUTER = ["dest:prep>Flavor._load#1", "dest:prep>Instance.save#1",
         "source:resize>Instance.save#1", "dest:finish>Flavor._load#2", "source:confirm>x#1"]
INNER = ["source:resize>Instance.save#1", "dest:finish>Flavor._load#1"]


def test_same_points_matches_by_position_not_by_counter():
    assert campaign.same_points(OUTER, INNER) == {
        "source:resize>Instance.save#1": "source:resize>Instance.save#1",
        "dest:finish>Flavor._load#2": "dest:finish>Flavor._load#1"}


def test_same_points_is_empty_when_the_inner_trace_is_not_one_run():
    assert campaign.same_points(OUTER, ["dest:finish>Flavor._load#1", "source:resize>Instance.save#1"]) == {}
    assert campaign.same_points(OUTER, []) == {}


def test_a_call_the_cards_window_has_keeps_its_id_there():
    wider = [Item("s", p, t, "revert", window="lifecycle") for p in OUTER for t in ("source", "dest")]
    named = campaign.as_narrower(wider, {"revert": OUTER}, "resize", {"revert": INNER})
    assert len(named) == len(wider)
    assert Item("s", "dest:finish>Flavor._load#2", "dest", "revert", window="lifecycle") not in named
    assert Item("s", "dest:finish>Flavor._load#1", "dest", "revert") in named
    assert Item("s", "dest:prep>Flavor._load#1", "dest", "revert", window="lifecycle") in named
    mutated = [Item("s", OUTER[3], "dest", "revert", mutation="1944759", window="lifecycle")]
    assert campaign.as_narrower(mutated, {"revert": OUTER}, "resize", {"revert": INNER}) == [
        Item("s", INNER[1], "dest", "revert", mutation="1944759")]


def test_every_lifecycle_trace_holds_the_cards_window_whole():
    scen = scenario.load("pinned-hugepages")
    backend = nova_support.current_backend()
    card = discovery.points_without_nova(scen, backend, "resize")
    lifecycle = discovery.points_without_nova(scen, backend, "lifecycle")
    for ending in scen.endings:
        shared = campaign.same_points(lifecycle[ending], card[ending])
        assert sorted(shared.values()) == sorted(card[ending]), ending
    # a known entry for every window names each call by one id: it must be the same in both
    for entry in known.load():
        if entry.window == "*" and any(fnmatch.fnmatchcase(scen.name, s) for s in entry.scenarios):
            for ending in entry.endings:
                shared = campaign.same_points(lifecycle[ending], card[ending])
                for point in entry.points:
                    assert shared.get(point) == point, (point, ending)


def test_planning_asks_discovery_for_the_wanted_endings_only(monkeypatch):
    """plan.plan calls ``discover(scenario, window, endings)``: the CLI's discover
    once took that third argument as ``use_cache`` and ran every ending."""
    asked = []

    def fake_paths(scen, backend, window, endings=None, mutation=None):
        asked.append((window, endings))
        return {"lifecycle": {e: ["dest:prep>x#1"] for e in endings or scen.endings},
                "resize": {e: [] for e in scen.endings}}[window]

    def fake_outcomes(scen, backend, endings=None, mutation=None):
        asked.append(("outcomes", endings))
        return {e: Record(Item.uninjected(scen.name, e), "pass", []) for e in endings}
    monkeypatch.setattr(discovery, "points_without_nova", fake_paths)
    monkeypatch.setattr(discovery, "outcomes", fake_outcomes)
    monkeypatch.setattr(nova_support, "current_backend", lambda: "threads")
    from harness.execute import plan
    scen = scenario.load("pinned-hugepages")
    planned = plan.plan([(scen, "lifecycle", ["source"], ["revert"])])
    assert asked and all(endings == ["revert"] for _, endings in asked), asked
    assert [r.item.id for r in planned.uninjected] == ["pinned-hugepages/uninjected/none/revert"]
