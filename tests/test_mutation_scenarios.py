"""The 1944759 self-test beyond the card's scenario.

In every scenario where the race applies -- a resize to another host: a
cold migration keeps its flavor, and Nova's resource tracker then reads the
instance's own flavor, not old_flavor -- the re-introduced race must be
caught right after the host flip and not at the flip itself.
tests/test_campaign.py sweeps every point of the card's scenario with one
ending; here two points per scenario, every ending, keep CI short: CI
runs the scenario least like the card's (the subject moving B -> A),
``tox -e breadth`` every one (a guest spanning two cells, ...).
"""
import json

import pytest

from harness import scenario
from tests.conftest import cli
from tests.test_campaign import FLIP_SAVE

AFTER_FLIP = "source:ComputeManager._resize_instance>compute_rpc.finish_resize#1"
SAMPLE = {FLIP_SAVE: False, AFTER_FLIP: True}
#: the subject's source host in each scenario (crossing's subject moves B -> A)
SOURCE = {n: ("host-b" if n == "crossing" else "host-a") for n in scenario.available()}
MOVING = sorted(n for n in scenario.available()
                if not scenario.load(n).same_host and scenario.load(n).subject.op == "resize")
IN_CI = ("crossing",)


@pytest.mark.parametrize("name", [n if n in IN_CI else pytest.param(n, marks=pytest.mark.breadth)
                                  for n in MOVING])
def test_1944759_caught_exactly_in_the_race_window(name, tmp_path):
    report = tmp_path / "report.json"
    args = ["run", name, "--mutate", "1944759", "--target", "source", "--jobs", "2",
            "--json", str(report)]
    for point in SAMPLE:
        args += ["--point", point]
    proc = cli(*args)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    items = json.loads(report.read_text())["items"]
    assert len(items) == len(SAMPLE) * len(scenario.load(name).endings)
    for item in items:
        point = item["id"].split("/")[1]
        caught = item["verdict"] == "fail"
        assert item["fired"], item["id"]
        assert caught == SAMPLE[point], (item["id"], item["problems"][:6])
        if caught:  # the source lost what the outgoing instance held
            assert any(f"{SOURCE[name]} " in p["text"] for p in item["problems"]
                       if p["kind"] == "finding"), item["problems"][:6]
