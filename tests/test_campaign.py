"""The chaos campaign as tests: clean Nova passes, the 1944759 mutation is caught exactly.

One test item per (point, target, ending); ``pytest -n auto`` spreads them.
"""
import pytest

from harness import scenario
from harness.cloud import nova_support
from harness.execute import discovery
from harness.front import report

SCENARIO = "pinned-hugepages"
#: Nova 34's save that flips instance.host/node to the destination
FLIP_SAVE = "source:ComputeManager._resize_instance>Instance.save#2"
#: the destination's save that stores old_flavor (and the new flavor)
DEST_SAVE = "dest:ComputeManager._finish_resize>Instance.save#1"


def race_window(points):
    """Points where the source's periodic sees host flipped but no old_flavor.

    Injection happens *before* the named call, so the window starts at the
    point after the flip save and includes the destination's save itself.
    """
    return points[points.index(FLIP_SAVE) + 1: points.index(DEST_SAVE) + 1]


# every point, the source, revert; confirm's path is swept by auto-confirm below with
# both hosts injected (the whole of it: tox -e chaos), to keep CI short
@pytest.mark.chaos(scenario=SCENARIO, endings=["revert"], targets=["source"])
def test_clean_nova(chaos_result):
    assert chaos_result.verdict in ("pass", "known"), report.failure_text(chaos_result)


# auto-confirm at every point with both hosts injected (the whole of it: tox -e chaos)
@pytest.mark.chaos(scenario=SCENARIO, endings=["auto-confirm"], targets=["both"])
def test_clean_nova_auto_confirm(chaos_result):
    assert chaos_result.verdict in ("pass", "known"), report.failure_text(chaos_result)


# every point, the source, with one ending: caught exactly where the source's periodic
# falls in the window and nowhere else; confirm and auto-confirm (which fail differently)
# are checked at the window's edges in tests/test_mutation_scenarios.py, the destination
# and "both" in tests/test_modes.py, to keep CI short (all of it: tox -e chaos --mutate 1944759)
@pytest.mark.chaos(scenario=SCENARIO, mutation="1944759", endings=["revert"],
                   targets=["source"])
def test_mutation_1944759(chaos_item, chaos_result):
    points = discovery.points_without_nova(scenario.load(SCENARIO),
                                          nova_support.default_backend()[0])[chaos_item.ending]
    expect_caught = chaos_item.point in race_window(points) and chaos_item.target in ("source", "both")
    caught = chaos_result.verdict == "fail"
    assert chaos_result.fired, "the injection must fire"
    # the cause as a condition on the state the periodic met, not on the point's name
    # (issue 30): the source's periodic sees the instance on the destination, no old flavor
    met = chaos_result.state["source"]["vm1"]
    assert (met["runs_on"], met["migration"]["type"]) == ("source", "resize"), met
    assert expect_caught == (met["instance"]["host"] == "dest"
                             and not met["instance"]["old_flavor"]), (chaos_item.id, met)
    if expect_caught:
        assert caught, f"1944759 not caught at {chaos_item.id}"
        hard = "\n".join(p.text for p in chaos_result.of_kind("finding"))
        assert "host-a pinned pCPUs" in hard  # the source lost the outgoing pins
        if chaos_item.ending in ("confirm", "auto-confirm"):
            assert "CPUUnpinningInvalid" in hard
        else:
            assert "hugepages" in hard
    else:
        assert not caught, report.failure_text(chaos_result)
